#include "tandem/routing/prefill_queue.h"

namespace tandem::routing {

bool PrefillQueue::Enqueue(Ticket ticket, WorkerSlot worker, double predicted_seconds,
                           double now_seconds) {
  if (worker < 0 || worker >= kMaxWorkers) return true;  // nothing to order it against
  PerWorker& w = workers_[worker];
  Entry entry{.worker = worker};
  // A worker with anything held has no free place (Done refills places from the held ones at
  // once), so a free place means nothing could go before this one: start at once.
  if (options_.depth <= 0 || w.out < options_.depth) {
    ++w.out;
    ++total_out_;
    tickets_[ticket] = entry;
    return true;
  }
  entry.held = true;
  entry.key = predicted_seconds + options_.aging * now_seconds;
  w.held.emplace(entry.key, ticket);
  tickets_[ticket] = entry;
  return false;
}

void PrefillQueue::ReleaseNext(WorkerSlot worker, std::vector<Ticket>* released) {
  PerWorker& w = workers_[worker];
  const Ticket next = w.held.begin()->second;
  w.held.erase(w.held.begin());
  tickets_[next].held = false;
  ++w.out;
  ++total_out_;
  released->push_back(next);
}

std::vector<PrefillQueue::Ticket> PrefillQueue::Done(Ticket ticket) {
  std::vector<Ticket> released;
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return released;
  const Entry entry = it->second;
  tickets_.erase(it);
  PerWorker& w = workers_[entry.worker];
  if (entry.held) {
    w.held.erase({entry.key, ticket});
    return released;
  }
  --w.out;
  --total_out_;
  while (w.out < options_.depth && !w.held.empty()) ReleaseNext(entry.worker, &released);
  return released;
}

std::vector<PrefillQueue::Ticket> PrefillQueue::ReleaseAll(WorkerSlot worker) {
  std::vector<Ticket> released;
  while (!workers_[worker].held.empty()) ReleaseNext(worker, &released);
  return released;
}

bool PrefillQueue::IsHeld(Ticket ticket) const {
  auto it = tickets_.find(ticket);
  return it != tickets_.end() && it->second.held;
}

}  // namespace tandem::routing
