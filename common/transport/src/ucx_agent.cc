#include "tandem/transport/ucx_agent.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "tandem/transport/gate.h"

namespace tandem::transport {
namespace {

absl::Status UcsError(absl::string_view what, ucs_status_t status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ucs_status_string(status)));
}

class UcxRegistration final : public MemoryRegistration {
 public:
  UcxRegistration(ucp_context_h context, ucp_mem_h memh, RegionDescriptor descriptor)
      : context_(context), memh_(memh), descriptor_(std::move(descriptor)) {}
  ~UcxRegistration() override { ucp_mem_unmap(context_, memh_); }
  const RegionDescriptor& descriptor() const override { return descriptor_; }

 private:
  ucp_context_h context_;
  ucp_mem_h memh_;
  RegionDescriptor descriptor_;
};

struct Endpoint {
  ucp_ep_h ep = nullptr;
  // Set by UCX's error callback when the peer dies or the connection breaks.
  ucs_status_t failure = UCS_OK;
};

using Phase = GateSequencer::Phase;

struct Transfer {
  std::string peer;
  std::vector<ucp_rkey_h> rkeys;
  std::vector<void*> requests;  // outstanding UCX requests of the current phase
  GateSequencer gate;
};

// The gate's primitives on one UCX endpoint: ucp_put_nbx, and ucp_ep_flush_nbx as the fence
// (it completes once every earlier put on the endpoint is remotely complete).
class UcxOps final : public RmaOps {
 public:
  UcxOps(ucp_ep_h ep, Transfer& t) : ep_(ep), t_(t) {}

  absl::Status Put(const WriteSegment& s) override {
    ucp_request_param_t param{};
    return Track(ucp_put_nbx(ep_, s.local, s.bytes, s.remote_addr, t_.rkeys[s.region], &param),
                 "put");
  }

  absl::Status Fence() override {
    ucp_request_param_t param{};
    return Track(ucp_ep_flush_nbx(ep_, &param), "flush");
  }

  absl::StatusOr<bool> Reap() override {
    absl::Status failed;
    std::vector<void*> still;
    for (void* req : t_.requests) {
      const ucs_status_t st = ucp_request_check_status(req);
      if (st == UCS_INPROGRESS) {
        still.push_back(req);
        continue;
      }
      ucp_request_free(req);
      if (st != UCS_OK && failed.ok()) failed = UcsError("one-sided write failed", st);
    }
    t_.requests.swap(still);
    if (!failed.ok()) return failed;
    return t_.requests.empty();
  }

 private:
  absl::Status Track(ucs_status_ptr_t req, absl::string_view what) {
    if (req == nullptr) return absl::OkStatus();  // completed immediately
    if (UCS_PTR_IS_ERR(req)) return UcsError(what, UCS_PTR_STATUS(req));
    t_.requests.push_back(req);
    return absl::OkStatus();
  }

  ucp_ep_h ep_;
  Transfer& t_;
};

class UcxAgent final : public TransferAgent {
 public:
  ~UcxAgent() override {
    absl::MutexLock lock(&mu_);
    for (auto& [id, t] : transfers_) AbandonLocked(t);
    transfers_.clear();
    for (auto& [peer, ep] : endpoints_) CloseEndpointLocked(*ep);
    endpoints_.clear();
    if (local_address_ != nullptr) ucp_worker_release_address(worker_, local_address_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  absl::Status Init(const UcxAgentOptions& options) {
    ucp_config_t* config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) return UcsError("ucp_config_read", st);
    if (!options.transports.empty()) {
      st = ucp_config_modify(config, "TLS", options.transports.c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return absl::InvalidArgumentError(
            absl::StrCat("invalid UCX transport list '", options.transports, "'"));
      }
    }
    if (!options.tcp_port_range.empty()) {
      absl::Status valid = ValidatePortRange(options.tcp_port_range);
      if (!valid.ok()) {
        ucp_config_release(config);
        return valid;
      }
      // UCX 1.13 applies transport options given by their name inside the transport's table
      // ("PORT_RANGE", not "TCP_PORT_RANGE"), and only warns about names no transport takes.
      st = ucp_config_modify(config, "PORT_RANGE", options.tcp_port_range.c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return UcsError("ucp_config_modify(PORT_RANGE)", st);
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    // Wakeup lets an idle receiver block on an event fd (WaitForActivity); a UCX build or
    // transport list without it still works, polling instead.
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    st = ucp_init(&params, config, &context_);
    if (st != UCS_OK) {
      params.features = UCP_FEATURE_RMA;
      st = ucp_init(&params, config, &context_);
    }
    ucp_config_release(config);
    if (st != UCS_OK) return UcsError("ucp_init", st);

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // Every UCX call happens under mu_, so the worker needs no locking of its own.
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(context_, &wparams, &worker_);
    if (st != UCS_OK) return UcsError("ucp_worker_create", st);
    if ((params.features & UCP_FEATURE_WAKEUP) != 0 &&
        ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) {
      event_fd_ = -1;
    }
    st = ucp_worker_get_address(worker_, &local_address_, &local_address_len_);
    if (st != UCS_OK) return UcsError("ucp_worker_get_address", st);
    return absl::OkStatus();
  }

  std::string_view backend_name() const override { return "ucx"; }

  std::string local_address() const override {
    return std::string(reinterpret_cast<const char*>(local_address_), local_address_len_);
  }

  absl::StatusOr<std::unique_ptr<MemoryRegistration>> RegisterMemory(void* base,
                                                                     std::size_t bytes) override {
    if (base == nullptr || bytes == 0) {
      return absl::InvalidArgumentError("cannot register an empty memory region");
    }
    absl::MutexLock lock(&mu_);
    ucp_mem_map_params_t mparams{};
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mparams.address = base;
    mparams.length = bytes;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucp_mem_map(context_, &mparams, &memh);
    if (st != UCS_OK) return UcsError("ucp_mem_map", st);
    void* rkey_buffer = nullptr;
    std::size_t rkey_size = 0;
    st = ucp_rkey_pack(context_, memh, &rkey_buffer, &rkey_size);
    if (st != UCS_OK) {
      ucp_mem_unmap(context_, memh);
      return UcsError("ucp_rkey_pack", st);
    }
    RegionDescriptor d;
    d.base = reinterpret_cast<std::uint64_t>(base);
    d.length = bytes;
    d.remote_key.assign(static_cast<const char*>(rkey_buffer), rkey_size);
    ucp_rkey_buffer_release(rkey_buffer);
    return std::make_unique<UcxRegistration>(context_, memh, std::move(d));
  }

  absl::StatusOr<TransferId> StartGatedWrite(const GatedWrite& write) override {
    if (absl::Status valid = ValidateGatedWrite(write); !valid.ok()) return valid;
    absl::MutexLock lock(&mu_);
    auto ep_or = EndpointLocked(write.peer_address);
    if (!ep_or.ok()) return ep_or.status();
    Endpoint* ep = *ep_or;

    Transfer t;
    t.peer = write.peer_address;
    for (const RegionDescriptor& r : write.regions) {
      ucp_rkey_h rkey = nullptr;
      ucs_status_t st = ucp_ep_rkey_unpack(ep->ep, r.remote_key.data(), &rkey);
      if (st != UCS_OK) {
        for (ucp_rkey_h k : t.rkeys) ucp_rkey_destroy(k);
        return UcsError("remote key rejected", st);
      }
      t.rkeys.push_back(rkey);
    }
    UcxOps ops(ep->ep, t);
    t.gate.Start(ops, write);
    const TransferId id = next_id_++;
    transfers_.emplace(id, std::move(t));
    return id;
  }

  TransferStatus Poll(TransferId id) override {
    absl::MutexLock lock(&mu_);
    ucp_worker_progress(worker_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) {
      return {TransferState::kFailed, absl::NotFoundError(absl::StrCat("no transfer ", id)), 0};
    }
    Transfer& t = it->second;
    AdvanceLocked(t);
    return t.gate.status();
  }

  void Release(TransferId id) override {
    absl::MutexLock lock(&mu_);
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    AbandonLocked(it->second);
    transfers_.erase(it);
  }

  void WaitForActivity(std::chrono::microseconds max_wait) override {
    if (event_fd_ < 0) {
      std::this_thread::sleep_for(max_wait);
      return;
    }
    ucs_status_t armed;
    {
      absl::MutexLock lock(&mu_);
      // Arming fails with BUSY while events are pending, so what is there is progressed first.
      while (ucp_worker_progress(worker_) != 0) {
      }
      armed = ucp_worker_arm(worker_);
    }
    if (armed == UCS_ERR_BUSY) return;  // something arrived meanwhile: the caller progresses it
    if (armed != UCS_OK) {
      std::this_thread::sleep_for(max_wait);
      return;
    }
    // Another thread's progress may consume the event the fd would have signalled: the wait is
    // bounded by max_wait, so that costs latency, never a lost write.
    pollfd fd{event_fd_, POLLIN, 0};
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(max_wait);
    const timespec timeout{static_cast<time_t>(secs.count()),
                           static_cast<long>((max_wait - secs).count() * 1000)};
    ppoll(&fd, 1, &timeout, nullptr);
  }

  void Progress() override {
    absl::MutexLock lock(&mu_);
    ucp_worker_progress(worker_);
  }

  void Disconnect(const std::string& peer_address) override {
    absl::MutexLock lock(&mu_);
    DropEndpointLocked(peer_address, absl::CancelledError("peer disconnected"));
  }

 private:
  static void OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
    static_cast<Endpoint*>(arg)->failure = status;
  }

  absl::StatusOr<Endpoint*> EndpointLocked(const std::string& peer) {
    auto it = endpoints_.find(peer);
    if (it != endpoints_.end()) {
      if (it->second->failure == UCS_OK) return it->second.get();
      // A broken endpoint is replaced: the peer may have restarted at the same address.
      DropEndpointLocked(peer, UcsError("peer connection failed", it->second->failure));
    }
    if (peer.empty()) return absl::InvalidArgumentError("empty peer address");
    auto ep = std::make_unique<Endpoint>();
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxAgent::OnEndpointError;
    params.err_handler.arg = ep.get();
    ucs_status_t st = ucp_ep_create(worker_, &params, &ep->ep);
    if (st != UCS_OK) return UcsError("cannot connect to peer", st);
    Endpoint* raw = ep.get();
    endpoints_.emplace(peer, std::move(ep));
    return raw;
  }

  void AdvanceLocked(Transfer& t) {
    const Phase before = t.gate.phase();
    if (before == Phase::kDone || before == Phase::kFailed) return;
    auto ep_it = endpoints_.find(t.peer);
    if (ep_it == endpoints_.end() || ep_it->second->failure != UCS_OK) {
      const ucs_status_t why =
          ep_it == endpoints_.end() ? UCS_ERR_CONNECTION_RESET : ep_it->second->failure;
      t.gate.Fail(UcsError("peer connection failed", why));
    }
    // A failed transfer still reaps what completed; Release waits for the rest.
    UcxOps ops(ep_it == endpoints_.end() ? nullptr : ep_it->second->ep, t);
    t.gate.Advance(ops);
    if (t.gate.phase() == Phase::kDone) ReleaseKeysLocked(t);
  }

  void ReleaseKeysLocked(Transfer& t) {
    for (ucp_rkey_h k : t.rkeys) ucp_rkey_destroy(k);
    t.rkeys.clear();
  }

  // Waits (bounded) for UCX to hand back outstanding requests; on a dead peer they complete with
  // an error once the endpoint is closed.
  void AbandonLocked(Transfer& t) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!t.requests.empty() && std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker_);
      std::vector<void*> still;
      for (void* req : t.requests) {
        if (ucp_request_check_status(req) == UCS_INPROGRESS) {
          still.push_back(req);
        } else {
          ucp_request_free(req);
        }
      }
      t.requests.swap(still);
    }
    for (void* req : t.requests) {
      ucp_request_cancel(worker_, req);
      ucp_request_free(req);
    }
    t.requests.clear();
    ReleaseKeysLocked(t);
  }

  // Remote keys must be destroyed before the endpoint they were unpacked on, so transfers through
  // it are ended first.
  void DropEndpointLocked(const std::string& peer, const absl::Status& why) {
    auto it = endpoints_.find(peer);
    if (it == endpoints_.end()) return;
    for (auto& [id, t] : transfers_) {
      if (t.peer != peer) continue;
      if (t.gate.phase() != Phase::kDone) t.gate.Fail(why);
      AbandonLocked(t);
    }
    CloseEndpointLocked(*it->second);
    endpoints_.erase(it);
  }

  void CloseEndpointLocked(Endpoint& ep) {
    if (ep.ep == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep.ep, &param);
    if (req != nullptr && UCS_PTR_IS_PTR(req)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (ucp_request_check_status(req) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline) {
        ucp_worker_progress(worker_);
      }
      ucp_request_free(req);
    }
    ep.ep = nullptr;
  }

  absl::Mutex mu_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // set once in Init; -1 without wakeup support
  ucp_address_t* local_address_ = nullptr;
  std::size_t local_address_len_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TransferId, Transfer> transfers_ ABSL_GUARDED_BY(mu_);
  TransferId next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace

absl::Status ValidatePortRange(const std::string& range) {
  if (range.empty()) return absl::OkStatus();
  const std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
  const bool digits_only =
      absl::c_all_of(range, [](char c) { return absl::ascii_isdigit(c) || c == '-'; });
  int lo = 0, hi = 0;
  if (!digits_only || ends.size() != 2 || !absl::SimpleAtoi(ends[0], &lo) ||
      !absl::SimpleAtoi(ends[1], &hi) || lo < 1 || hi > 65535 || lo > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid port range '", range, "': want LO-HI with 1 <= LO <= HI <= 65535"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TransferAgent>> CreateUcxAgent(const UcxAgentOptions& options) {
  auto agent = std::make_unique<UcxAgent>();
  absl::Status st = agent->Init(options);
  if (!st.ok()) return st;
  return agent;
}

}  // namespace tandem::transport
