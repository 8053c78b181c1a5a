#include "workers/worker_registry.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "tandem/rpc/conversions.h"

namespace tandem::router {

const char* RoleName(v1::WorkerRole role) {
  switch (role) {
    case v1::WORKER_ROLE_PREFILL: return "prefill";
    case v1::WORKER_ROLE_DECODE: return "decode";
    case v1::WORKER_ROLE_COMBINED: return "combined";
    case v1::WORKER_ROLE_ENCODER: return "encoder";
    default: return "unspecified";
  }
}

bool KvCompatible(const v1::WorkerInfo& prefill, const v1::WorkerInfo& decode) {
  return prefill.kv_layout_id() == decode.kv_layout_id();
}

bool SameGeneration(const v1::WorkerInfo& prefill, const v1::WorkerInfo& decode) {
  return KvCompatible(prefill, decode) && prefill.generation() == decode.generation();
}

WorkerEntry::WorkerEntry(v1::WorkerInfo info, std::shared_ptr<grpc::Channel> channel)
    : info_(std::move(info)), channel_(std::move(channel)), stub_(v1::Worker::NewStub(channel_)) {}

void WorkerEntry::Owe(OwedCancel cancel) {
  absl::MutexLock lock(&owed_mu_);
  if (owed_.size() >= WorkerRegistry::kMaxOwedCancels) owed_.pop_front();
  owed_.push_back(std::move(cancel));
}

std::deque<WorkerEntry::OwedCancel> WorkerEntry::TakeOwed() {
  absl::MutexLock lock(&owed_mu_);
  return std::exchange(owed_, {});
}

WorkerLease::WorkerLease(WorkerRegistry* registry, std::shared_ptr<WorkerEntry> entry)
    : registry_(registry), entry_(std::move(entry)) {}

WorkerLease::~WorkerLease() {
  if (prefill_hook_) prefill_hook_(nullptr);
  if (release_hook_) release_hook_();
  registry_->Release(*entry_, watched_);
}

void WorkerLease::PrefillDone(const v1::PrefillResponse& response) {
  if (!prefill_hook_) return;
  prefill_hook_(&response);
  prefill_hook_ = nullptr;
}

async::Task<absl::Status> WorkerLease::Start(async::Executor* executor, CallCanceller* canceller,
                                             std::chrono::system_clock::time_point deadline) {
  if (!start_gate_) co_return absl::OkStatus();
  absl::StatusOr<Started> started = co_await start_gate_(executor, canceller, deadline);
  if (!started.ok()) co_return started.status();
  own_piece_tokens_ = started->own_piece_tokens;
  std::optional<Moved>& turn = started->moved;
  if (turn.has_value() && turn->to != nullptr && turn->to != entry_) {
    // Counted on the new worker before the old one lets go: the load never reads low on both.
    std::shared_ptr<WorkerEntry> to = std::move(turn->to);
    registry_->CountIn(*to);
    CallCanceller* watched = std::exchange(watched_, nullptr);
    registry_->Release(*entry_, watched);
    entry_ = std::move(to);
    if (watched != nullptr) Watch(watched);
    moved_cached_tokens_ = turn->predicted_cached_tokens;
  }
  co_return absl::OkStatus();
}

void WorkerLease::Watch(CallCanceller* canceller) {
  if (watched_ != nullptr) return;
  watched_ = canceller;
  registry_->AddWatcher(*entry_, canceller);
}

WorkerRegistry::WorkerRegistry(Options options) : options_(std::move(options)) {}

absl::Status WorkerRegistry::Validate(const v1::RegisterWorkerRequest& request) const {
  if (absl::Status st = rpc::CheckVersion(request.version()); !st.ok()) return st;
  const v1::WorkerInfo& info = request.worker();
  if (info.worker_id().empty()) return absl::InvalidArgumentError("worker.worker_id is required");
  if (info.model().empty()) return absl::InvalidArgumentError("worker.model is required");
  if (info.grpc_endpoint().empty()) {
    return absl::InvalidArgumentError("worker.grpc_endpoint is required");
  }
  const v1::WorkerRole role = info.role();
  if (role != v1::WORKER_ROLE_PREFILL && role != v1::WORKER_ROLE_DECODE &&
      role != v1::WORKER_ROLE_COMBINED && role != v1::WORKER_ROLE_ENCODER) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.role ", RoleName(role), " cannot serve generations"));
  }
  // Encoders hold no KV: block size and hash scheme are not theirs to agree on.
  if (role != v1::WORKER_ROLE_ENCODER &&
      static_cast<int>(info.kv_block_size()) != options_.kv_block_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", info.worker_id(), " uses KV blocks of ", info.kv_block_size(),
        " tokens but this router uses ", options_.kv_block_size,
        ": their prefix hashes would never match"));
  }
  if (role != v1::WORKER_ROLE_ENCODER && info.kv_hash_scheme() != options_.kv_hash_scheme) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", info.worker_id(), " hashes KV blocks with '", info.kv_hash_scheme(),
        "' but this router uses '", options_.kv_hash_scheme,
        "': its KV events would never match a request (every lookup a miss)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterWorkerResponse> WorkerRegistry::Register(
    const v1::RegisterWorkerRequest& request) {
  if (absl::Status st = Validate(request); !st.ok()) return st;
  const v1::WorkerInfo& info = request.worker();
  const v1::WorkerRole role = info.role();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel> channel;
  auto it = workers_.find(info.worker_id());
  if (it != workers_.end() && SameRegistration(it->second->info(), info)) {
    // The same process registering again (it lost touch with us): keep its entry, so requests
    // in flight on it stay counted and watched.
    Revive(it->second);
    return LeaseTerms();
  }
  if (it != workers_.end()) {
    WorkerEntry& old = *it->second;
    // The old registration's requests must stop waiting on a process that is gone.
    if (old.info().incarnation() != info.incarnation()) MarkDownLocked(old, "re-registered");
    if (old.info().grpc_endpoint() == info.grpc_endpoint()) channel = old.channel_;
    // The new registration takes over the series; under another role its labels differ, and the
    // old ones would stay frozen.
    DetachMetricsLocked(old, /*remove_series=*/old.role() != role);
  }
  if (channel == nullptr) {
    channel = security::CreateChannel(info.grpc_endpoint(), options_.tls);
  }
  auto entry = std::make_shared<WorkerEntry>(info, std::move(channel));
  entry->last_seen_ = options_.now();
  WorkerEntry& added = *entry;
  workers_[info.worker_id()] = std::move(entry);
  AttachMetricsLocked(added);
  PublishLoadLocked(added);
  return LeaseTerms();
}

void WorkerRegistry::AttachMetricsLocked(WorkerEntry& entry) {
  if (options_.metrics == nullptr) return;
  const RouterMetrics& m = *options_.metrics;
  const std::vector<std::string> labels = {entry.id(), RoleName(entry.role())};
  entry.load_gauge_ = m.worker_load->WithLabels(labels).value_or(nullptr);
  entry.up_gauge_ = m.worker_up->WithLabels(labels).value_or(nullptr);
  if (m.worker_draining != nullptr) {
    entry.draining_gauge_ = m.worker_draining->WithLabels(labels).value_or(nullptr);
  }
  if (entry.up_gauge_ != nullptr) entry.up_gauge_->Set(entry.up_ ? 1 : 0);
  if (entry.draining_gauge_ != nullptr) entry.draining_gauge_->Set(entry.draining_ ? 1 : 0);
}

void WorkerRegistry::DetachMetricsLocked(WorkerEntry& entry, bool remove_series) {
  // Every use of these pointers holds mu_, as this does: none can be in use while they go.
  entry.load_gauge_ = nullptr;
  entry.up_gauge_ = nullptr;
  entry.draining_gauge_ = nullptr;
  if (remove_series && options_.metrics != nullptr) {
    options_.metrics->RemoveWorkerSeries(entry.id(), RoleName(entry.role()));
  }
}

std::chrono::milliseconds WorkerRegistry::forget_after() const {
  return std::chrono::milliseconds(options_.forget_after_ms > 0
                                       ? options_.forget_after_ms
                                       : kForgetAfterLeases * options_.lease_ms);
}

bool WorkerRegistry::Deregister(const std::string& worker_id, std::uint64_t incarnation,
                                const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second->info().incarnation() != incarnation) return false;
  std::shared_ptr<WorkerEntry> entry = std::move(it->second);
  workers_.erase(it);
  // Whatever still runs there is cut when the process exits: let it migrate now instead.
  MarkDownLocked(*entry, absl::StrCat("deregistered (", reason.empty() ? "no reason" : reason,
                                      ")"));
  DetachMetricsLocked(*entry, /*remove_series=*/true);
  std::cerr << "router: worker " << worker_id << " deregistered"
            << (reason.empty() ? "" : ": ") << reason << "\n";
  return true;
}

bool WorkerRegistry::SameRegistration(const v1::WorkerInfo& a, const v1::WorkerInfo& b) {
  return a.incarnation() == b.incarnation() && a.grpc_endpoint() == b.grpc_endpoint() &&
         a.role() == b.role() && a.model() == b.model() && a.max_context() == b.max_context();
}

v1::RegisterWorkerResponse WorkerRegistry::LeaseTerms() const {
  v1::RegisterWorkerResponse response;
  *response.mutable_version() = rpc::CurrentVersion();
  // Three heartbeats per lease: one lost heartbeat does not take a worker down.
  response.set_heartbeat_interval_ms(std::max(1, options_.lease_ms / 3));
  response.set_lease_ms(options_.lease_ms);
  return response;
}

void WorkerRegistry::Revive(const std::shared_ptr<WorkerEntry>& entry) {
  entry->last_seen_ = options_.now();
  for (WorkerEntry::OwedCancel& cancel : entry->TakeOwed()) SendCancel(entry, std::move(cancel));
  if (entry->up_) return;
  entry->up_ = true;
  if (entry->up_gauge_ != nullptr) entry->up_gauge_->Set(1);
  std::cerr << "router: worker " << entry->id() << " is back\n";
}

void WorkerRegistry::Cancel(const WorkerEntry& worker, const std::string& request_id) {
  std::shared_ptr<WorkerEntry> entry;
  {
    absl::MutexLock lock(&mu_);
    ExpireLeasesLocked();
    auto it = workers_.find(worker.id());
    if (it == workers_.end() || it->second.get() != &worker) return;
    entry = it->second;
    if (!entry->up_) {
      entry->Owe({.request_id = request_id});
      return;
    }
  }
  SendCancel(std::move(entry), {.request_id = request_id});
}

void WorkerRegistry::SendCancel(std::shared_ptr<WorkerEntry> entry,
                                WorkerEntry::OwedCancel cancel) const {
  // The call's state lives until its completion, which may outlive the registry: it touches only
  // the entry it holds.
  struct Call {
    grpc::ClientContext ctx;
    v1::CancelRequest request;
    v1::CancelResponse response;
    std::shared_ptr<WorkerEntry> entry;
    WorkerEntry::OwedCancel cancel;
  };
  auto call = std::make_shared<Call>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + options_.cancel_timeout);
  call->request.set_request_id(cancel.request_id);
  ++cancel.sends;
  call->cancel = std::move(cancel);
  call->entry = std::move(entry);
  Call* raw = call.get();
  raw->entry->stub().async()->Cancel(
      &raw->ctx, &raw->request, &raw->response, [call = std::move(call)](grpc::Status status) {
        // Not through (the worker unreachable, or too slow to answer): owed again.
        const bool lost = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
        if (lost && call->cancel.sends < kMaxCancelSends) call->entry->Owe(std::move(call->cancel));
      });
}

v1::HeartbeatResponse WorkerRegistry::Heartbeat(const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(request.worker_id());
  if (it == workers_.end() || it->second->info().incarnation() != request.incarnation()) {
    response.set_reregister(true);
    return response;
  }
  WorkerEntry& entry = *it->second;
  entry.load_ = request.load();
  if (request.load().draining()) MarkDrainingLocked(entry);
  Revive(it->second);
  PublishLoadLocked(entry);
  return response;
}

std::vector<WorkerView> WorkerRegistry::Healthy(const std::string& model, v1::WorkerRole role) {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  std::vector<WorkerView> out;
  for (const auto& [id, entry] : workers_) {
    if (!entry->up_ || entry->draining_ || entry->role() != role ||
        entry->info().model() != model) {
      continue;
    }
    out.push_back({entry, entry->router_in_flight() +
                              static_cast<int>(entry->load_.running_requests() +
                                               entry->load_.waiting_requests())});
  }
  // Deterministic order, so ties go to the same worker every time.
  std::sort(out.begin(), out.end(),
            [](const WorkerView& a, const WorkerView& b) { return a.entry->id() < b.entry->id(); });
  return out;
}

bool WorkerRegistry::Placeable(const WorkerEntry& entry) {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  auto it = workers_.find(entry.id());
  return it != workers_.end() && it->second.get() == &entry && entry.up_ && !entry.draining_;
}

std::unique_ptr<WorkerLease> WorkerRegistry::Acquire(std::shared_ptr<WorkerEntry> entry) {
  CountIn(*entry);
  return std::make_unique<WorkerLease>(this, std::move(entry));
}

void WorkerRegistry::CountIn(WorkerEntry& entry) {
  entry.in_flight_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  PublishLoadLocked(entry);
}

void WorkerRegistry::Release(WorkerEntry& entry, CallCanceller* watched) {
  entry.in_flight_.fetch_sub(1);
  absl::MutexLock lock(&mu_);
  if (watched != nullptr) {
    auto& w = entry.watchers_;
    w.erase(std::remove(w.begin(), w.end(), watched), w.end());
  }
  PublishLoadLocked(entry);
}

void WorkerRegistry::AddWatcher(WorkerEntry& entry, CallCanceller* canceller) {
  absl::MutexLock lock(&mu_);
  if (!entry.up_) {
    canceller->Cancel(absl::UnavailableError(absl::StrCat("worker ", entry.id(), " is down")));
    return;
  }
  entry.watchers_.push_back(canceller);
}

void WorkerRegistry::MarkDraining(const WorkerEntry& entry) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(entry.id());
  if (it == workers_.end() || it->second.get() != &entry) return;
  MarkDrainingLocked(*it->second);
}

void WorkerRegistry::MarkDrainingLocked(WorkerEntry& entry) {
  if (entry.draining_) return;
  entry.draining_ = true;
  if (entry.draining_gauge_ != nullptr) entry.draining_gauge_->Set(1);
  std::cerr << "router: worker " << entry.id() << " is draining: no new work goes to it\n";
}

void WorkerRegistry::MarkDown(const WorkerEntry& entry, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(entry.id());
  // Only this registration: a newer incarnation of the same id has nothing to do with the failure.
  if (it == workers_.end() || it->second.get() != &entry) return;
  MarkDownLocked(*it->second, why);
}

void WorkerRegistry::MarkDownLocked(WorkerEntry& entry, const std::string& why) {
  if (!entry.up_) return;
  entry.up_ = false;
  entry.down_since_ = options_.now();
  if (entry.up_gauge_ != nullptr) entry.up_gauge_->Set(0);
  std::cerr << "router: worker " << entry.id() << " is down: " << why << "\n";
  const absl::Status reason =
      absl::UnavailableError(absl::StrCat("worker ", entry.id(), " is down: ", why));
  for (CallCanceller* canceller : entry.watchers_) canceller->Cancel(reason);
  entry.watchers_.clear();
}

void WorkerRegistry::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
}

void WorkerRegistry::ExpireLeasesLocked() {
  const auto now = options_.now();
  const auto lease = std::chrono::milliseconds(options_.lease_ms);
  const auto forget = forget_after();
  std::vector<std::string> gone;
  for (auto& [id, entry] : workers_) {
    if (entry->up_ && now - entry->last_seen_ > lease) {
      MarkDownLocked(*entry, absl::StrCat("no heartbeat for ", options_.lease_ms, " ms"));
    }
    // Down and silent for this long: a process that died without deregistering. Forgotten like a
    // deregistered one; should it come back, its next heartbeat is told to register again.
    if (!entry->up_ && now - entry->down_since_ > forget) gone.push_back(id);
  }
  for (const std::string& id : gone) {
    auto it = workers_.find(id);
    DetachMetricsLocked(*it->second, /*remove_series=*/true);
    std::cerr << "router: worker " << id << " forgotten: down for more than " << forget.count()
              << " ms\n";
    workers_.erase(it);
  }
}

void WorkerRegistry::PublishLoadLocked(WorkerEntry& entry) {
  if (entry.load_gauge_ == nullptr) return;
  // A replaced registration shares its labels with the new one, which owns the gauge now.
  auto it = workers_.find(entry.id());
  if (it != workers_.end() && it->second.get() != &entry) return;
  entry.load_gauge_->Set(entry.router_in_flight() + entry.load_.running_requests() +
                         entry.load_.waiting_requests());
}

WorkerRegistry::Readiness WorkerRegistry::Ready(const std::string& model) {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  int prefill = 0, decode = 0, combined = 0;
  for (const auto& [id, entry] : workers_) {
    if (!entry->up_ || entry->draining_ || entry->info().model() != model) continue;
    prefill += entry->role() == v1::WORKER_ROLE_PREFILL;
    decode += entry->role() == v1::WORKER_ROLE_DECODE;
    combined += entry->role() == v1::WORKER_ROLE_COMBINED;
  }
  if (combined > 0 || (prefill > 0 && decode > 0)) return {true, ""};
  return {false, absl::StrCat("no healthy workers can serve ", model, ": ", prefill, " prefill, ",
                              decode, " decode, ", combined, " combined")};
}

bool WorkerRegistry::IsUp(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second->up_;
}

bool WorkerRegistry::IsDraining(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second->draining_;
}

bool WorkerRegistry::Knows(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  return workers_.contains(worker_id);
}

}  // namespace tandem::router
