#include "tandem/transport/fault_agent.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tandem/transport/gate.h"

namespace tandem::transport {

namespace {

struct PendingPut {
  std::uint64_t seq = 0;
  int sender = 0;
  TransferId transfer = 0;
  std::uint64_t remote_addr = 0;
  std::string bytes;  // copied at issue: the sender's buffer is only lent until local completion
};

struct FaultTransfer {
  std::string peer;
  GateSequencer gate;
  std::vector<std::uint64_t> pending;  // seqs of this transfer's puts not landed yet
  std::uint64_t fenced_upto = 0;       // the latest fence waits for every put up to this seq
  absl::Status lost;                   // set when a put was dropped or its receiver went away
};

struct Region {
  std::uint64_t base = 0;
  std::uint64_t length = 0;
};

struct Endpoint {
  FaultOptions options;
  std::mt19937_64 rng;
  std::function<void(const Landing&)> observer;
  bool drop = false;
  std::map<int, Region> regions;  // by registration id
  std::deque<PendingPut> inbox;   // issue order
};

}  // namespace

class FaultNetwork {
 public:
  absl::Mutex mu;
  int next_agent ABSL_GUARDED_BY(mu) = 1;
  int next_region ABSL_GUARDED_BY(mu) = 1;
  std::uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  absl::flat_hash_map<int, Endpoint> agents ABSL_GUARDED_BY(mu);
  // By sender agent, then transfer id.
  absl::flat_hash_map<int, std::map<TransferId, FaultTransfer>> transfers ABSL_GUARDED_BY(mu);

  FaultTransfer* FindTransferLocked(int sender, TransferId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto s = transfers.find(sender);
    if (s == transfers.end()) return nullptr;
    auto t = s->second.find(id);
    return t == s->second.end() ? nullptr : &t->second;
  }

  // Forgets a put that will never land, failing its transfer with `why`.
  void LosePutLocked(const PendingPut& p, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    FaultTransfer* t = FindTransferLocked(p.sender, p.transfer);
    if (t == nullptr) return;
    std::erase(t->pending, p.seq);
    if (t->lost.ok()) t->lost = why;
  }

  void LandLocked(Endpoint& to, const PendingPut& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto* dst = reinterpret_cast<std::uint8_t*>(p.remote_addr);
    if (p.bytes.size() == sizeof(std::uint64_t) && p.remote_addr % alignof(std::uint64_t) == 0) {
      // Flag-sized writes are published like a NIC's would be seen by a poller: atomically.
      std::uint64_t v;
      std::memcpy(&v, p.bytes.data(), sizeof(v));
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(dst))
          .store(v, std::memory_order_release);
    } else {
      std::memcpy(dst, p.bytes.data(), p.bytes.size());
    }
    if (FaultTransfer* t = FindTransferLocked(p.sender, p.transfer)) std::erase(t->pending, p.seq);
    if (to.observer) to.observer({p.remote_addr, p.bytes.size()});
  }
};

std::shared_ptr<FaultNetwork> CreateFaultNetwork() { return std::make_shared<FaultNetwork>(); }

namespace {

std::string AddressOf(int agent) { return absl::StrCat("fault:", agent); }

class FaultRegistration final : public MemoryRegistration {
 public:
  FaultRegistration(std::shared_ptr<FaultNetwork> net, int agent, int id, RegionDescriptor d)
      : net_(std::move(net)), agent_(agent), id_(id), descriptor_(std::move(d)) {}
  ~FaultRegistration() override {
    absl::MutexLock lock(&net_->mu);
    auto it = net_->agents.find(agent_);
    if (it != net_->agents.end()) it->second.regions.erase(id_);
  }
  const RegionDescriptor& descriptor() const override { return descriptor_; }

 private:
  std::shared_ptr<FaultNetwork> net_;
  int agent_;
  int id_;
  RegionDescriptor descriptor_;
};

// The gate's primitives over the fault network: puts complete locally at once and wait in the
// receiver's inbox; a fence completes once every earlier put of the transfer has landed.
class FaultOps final : public RmaOps {
 public:
  FaultOps(FaultNetwork& net, int sender, TransferId id, FaultTransfer& t)
      : net_(net), sender_(sender), id_(id), t_(t) {}

  absl::Status Put(const WriteSegment& s) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const int peer = PeerId();
    auto it = net_.agents.find(peer);
    if (it == net_.agents.end()) return absl::UnavailableError("peer unreachable");
    bool registered = false;
    for (const auto& [rid, r] : it->second.regions) {
      registered |= s.remote_addr >= r.base && s.remote_addr + s.bytes <= r.base + r.length;
    }
    if (!registered) return absl::InvalidArgumentError("remote key rejected: region not registered");
    PendingPut p;
    p.seq = net_.next_seq++;
    p.sender = sender_;
    p.transfer = id_;
    p.remote_addr = s.remote_addr;
    p.bytes.assign(static_cast<const char*>(s.local), s.bytes);
    if (it->second.drop) {
      if (t_.lost.ok()) t_.lost = absl::UnavailableError("put dropped by the network");
      return absl::OkStatus();
    }
    t_.pending.push_back(p.seq);
    it->second.inbox.push_back(std::move(p));
    return absl::OkStatus();
  }

  absl::Status Fence() override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    t_.fenced_upto = net_.next_seq - 1;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Reap() override {
    if (!t_.lost.ok()) return t_.lost;
    for (std::uint64_t seq : t_.pending) {
      if (seq <= t_.fenced_upto) return false;
    }
    return true;
  }

 private:
  int PeerId() const {
    int id = 0;
    if (!t_.peer.starts_with("fault:") ||
        !absl::SimpleAtoi(absl::string_view(t_.peer).substr(6), &id)) {
      return 0;
    }
    return id;
  }

  FaultNetwork& net_;
  int sender_;
  TransferId id_;
  FaultTransfer& t_;
};

class FaultAgentImpl final : public FaultAgent {
 public:
  FaultAgentImpl(std::shared_ptr<FaultNetwork> net, FaultOptions options) : net_(std::move(net)) {
    absl::MutexLock lock(&net_->mu);
    id_ = net_->next_agent++;
    Endpoint& e = net_->agents[id_];
    e.options = options;
    e.rng.seed(options.seed);
  }

  ~FaultAgentImpl() override {
    absl::MutexLock lock(&net_->mu);
    // Puts still addressed to us will never land: their senders' transfers fail, as with a peer
    // that died.
    auto it = net_->agents.find(id_);
    for (const PendingPut& p : it->second.inbox) {
      net_->LosePutLocked(p, absl::UnavailableError("peer went away"));
    }
    net_->agents.erase(it);
    // Our own puts in flight are abandoned.
    for (auto& [peer_id, peer] : net_->agents) {
      std::erase_if(peer.inbox, [&](const PendingPut& p) { return p.sender == id_; });
    }
    net_->transfers.erase(id_);
  }

  std::string_view backend_name() const override { return "fault"; }
  std::string local_address() const override { return AddressOf(id_); }

  absl::StatusOr<std::unique_ptr<MemoryRegistration>> RegisterMemory(void* base,
                                                                     std::size_t bytes) override {
    if (base == nullptr || bytes == 0) {
      return absl::InvalidArgumentError("cannot register an empty memory region");
    }
    absl::MutexLock lock(&net_->mu);
    const int rid = net_->next_region++;
    RegionDescriptor d{reinterpret_cast<std::uint64_t>(base), bytes, AddressOf(id_)};
    net_->agents[id_].regions[rid] = {d.base, d.length};
    return std::make_unique<FaultRegistration>(net_, id_, rid, std::move(d));
  }

  absl::StatusOr<TransferId> StartGatedWrite(const GatedWrite& write) override {
    if (absl::Status valid = ValidateGatedWrite(write); !valid.ok()) return valid;
    absl::MutexLock lock(&net_->mu);
    const TransferId id = next_transfer_++;
    FaultTransfer& t = net_->transfers[id_][id];
    t.peer = write.peer_address;
    FaultOps ops(*net_, id_, id, t);
    t.gate.Start(ops, write);
    return id;
  }

  TransferStatus Poll(TransferId id) override {
    absl::MutexLock lock(&net_->mu);
    FaultTransfer* t = net_->FindTransferLocked(id_, id);
    if (t == nullptr) {
      return {TransferState::kFailed, absl::NotFoundError(absl::StrCat("no transfer ", id)), 0};
    }
    FaultOps ops(*net_, id_, id, *t);
    t->gate.Advance(ops);
    return t->gate.status();
  }

  void Release(TransferId id) override {
    absl::MutexLock lock(&net_->mu);
    // An abandoned transfer's puts never land.
    for (auto& [peer_id, peer] : net_->agents) {
      std::erase_if(peer.inbox,
                    [&](const PendingPut& p) { return p.sender == id_ && p.transfer == id; });
    }
    auto s = net_->transfers.find(id_);
    if (s != net_->transfers.end()) s->second.erase(id);
  }

  void Progress() override {
    absl::MutexLock lock(&net_->mu);
    Endpoint& me = net_->agents[id_];
    for (int n = 0; n < me.options.puts_per_progress && !me.inbox.empty(); ++n) {
      std::size_t pick = 0;
      switch (me.options.landing) {
        case FaultOptions::Landing::kInOrder:
          pick = 0;
          break;
        case FaultOptions::Landing::kNewestFirst:
          pick = me.inbox.size() - 1;
          break;
        case FaultOptions::Landing::kShuffled:
          pick = std::uniform_int_distribution<std::size_t>(0, me.inbox.size() - 1)(me.rng);
          break;
      }
      PendingPut p = std::move(me.inbox[pick]);
      me.inbox.erase(me.inbox.begin() + static_cast<std::ptrdiff_t>(pick));
      net_->LandLocked(me, p);
    }
  }

  void Disconnect(const std::string&) override {}  // connectionless

  void SetLandingObserver(std::function<void(const Landing&)> observer) override {
    absl::MutexLock lock(&net_->mu);
    net_->agents[id_].observer = std::move(observer);
  }

  void SetDropPuts(bool drop) override {
    absl::MutexLock lock(&net_->mu);
    Endpoint& me = net_->agents[id_];
    me.drop = drop;
    if (!drop) return;
    for (const PendingPut& p : me.inbox) {
      net_->LosePutLocked(p, absl::UnavailableError("put dropped by the network"));
    }
    me.inbox.clear();
  }

  std::size_t pending_puts() const override {
    absl::MutexLock lock(&net_->mu);
    return net_->agents.at(id_).inbox.size();
  }

 private:
  std::shared_ptr<FaultNetwork> net_;
  int id_ = 0;
  TransferId next_transfer_ = 1;  // guarded by net_->mu
};

}  // namespace

std::unique_ptr<FaultAgent> FaultAgent::Create(std::shared_ptr<FaultNetwork> network,
                                               FaultOptions options) {
  return std::make_unique<FaultAgentImpl>(std::move(network), options);
}

}  // namespace tandem::transport
