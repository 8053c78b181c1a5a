#include "tandem/routing/prefill_queue.h"

#include <algorithm>

namespace tandem::routing {

bool PrefillQueue::MayStart(const PerWorker& w, std::int64_t tokens) const {
  if (options_.depth <= 0 || w.out < options_.depth) return true;
  return w.batch_tokens > 0 && w.out_tokens + tokens <= w.batch_tokens;
}

void PrefillQueue::Start(WorkerSlot worker, Entry* entry) {
  PerWorker& w = workers_[worker];
  entry->held = false;
  ++w.out;
  w.out_tokens += entry->tokens;
  ++total_out_;
}

void PrefillQueue::SetBatchTokens(WorkerSlot worker, std::int64_t tokens) {
  if (worker < 0 || worker >= kMaxWorkers) return;
  workers_[worker].batch_tokens = std::max<std::int64_t>(0, tokens);
}

bool PrefillQueue::Enqueue(Ticket ticket, WorkerSlot worker, double predicted_seconds,
                           double now_seconds, std::int64_t tokens) {
  if (worker < 0 || worker >= kMaxWorkers) return true;  // nothing to order it against
  Entry& entry = tickets_[ticket];
  entry = Entry{
      .worker = worker, .enqueued = now_seconds, .tokens = std::max<std::int64_t>(0, tokens)};
  return Place(ticket, &entry, predicted_seconds);
}

bool PrefillQueue::Place(Ticket ticket, Entry* entry, double predicted_seconds) {
  PerWorker& w = workers_[entry->worker];
  // Whatever is held goes before a newcomer, so it may start only when nothing is held (Done
  // refills free places from the held ones at once).
  if (w.held.empty() && MayStart(w, entry->tokens)) {
    Start(entry->worker, entry);
    return true;
  }
  entry->held = true;
  entry->key = predicted_seconds + options_.aging * entry->enqueued;
  w.held.emplace(entry->key, ticket);
  return false;
}

void PrefillQueue::ReleaseNext(WorkerSlot worker, std::vector<Ticket>* released) {
  PerWorker& w = workers_[worker];
  const Ticket next = w.held.begin()->second;
  w.held.erase(w.held.begin());
  Start(worker, &tickets_[next]);
  released->push_back(next);
}

void PrefillQueue::ReleaseFitting(WorkerSlot worker, std::vector<Ticket>* released) {
  PerWorker& w = workers_[worker];
  while (!w.held.empty() && MayStart(w, tickets_[w.held.begin()->second].tokens)) {
    ReleaseNext(worker, released);
  }
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
  w.out_tokens -= entry.tokens;
  --total_out_;
  ReleaseFitting(entry.worker, &released);
  return released;
}

std::vector<PrefillQueue::Ticket> PrefillQueue::Requeue(Ticket ticket, double predicted_seconds,
                                                        std::int64_t tokens) {
  std::vector<Ticket> released;
  auto it = tickets_.find(ticket);
  if (it == tickets_.end() || it->second.held) return released;
  Entry& entry = it->second;
  PerWorker& w = workers_[entry.worker];
  --w.out;
  w.out_tokens -= entry.tokens;
  --total_out_;
  entry.tokens = std::max<std::int64_t>(0, tokens);
  entry.held = true;
  entry.key = predicted_seconds + options_.aging * entry.enqueued;
  w.held.emplace(entry.key, ticket);
  ReleaseFitting(entry.worker, &released);
  return released;
}

std::vector<PrefillQueue::Ticket> PrefillQueue::ReleaseAll(WorkerSlot worker) {
  std::vector<Ticket> released;
  while (!workers_[worker].held.empty()) ReleaseNext(worker, &released);
  return released;
}

std::vector<PrefillQueue::Ticket> PrefillQueue::HeldFor(WorkerSlot worker) const {
  std::vector<Ticket> out;
  if (worker < 0 || worker >= kMaxWorkers) return out;
  for (const auto& [key, ticket] : workers_[worker].held) out.push_back(ticket);
  return out;
}

bool PrefillQueue::Move(Ticket ticket, WorkerSlot to, double predicted_seconds,
                        std::int64_t tokens) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end() || !it->second.held || to < 0 || to >= kMaxWorkers) return false;
  Entry& entry = it->second;
  workers_[entry.worker].held.erase({entry.key, ticket});
  entry.worker = to;
  entry.tokens = std::max<std::int64_t>(0, tokens);
  return Place(ticket, &entry, predicted_seconds);
}

std::int64_t PrefillQueue::tokens(Ticket ticket) const {
  auto it = tickets_.find(ticket);
  return it == tickets_.end() ? 0 : it->second.tokens;
}

bool PrefillQueue::IsHeld(Ticket ticket) const {
  auto it = tickets_.find(ticket);
  return it != tickets_.end() && it->second.held;
}

}  // namespace tandem::routing
