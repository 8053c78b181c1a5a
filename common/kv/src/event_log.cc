#include "tandem/kv/event_log.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::kv {

EventLog::EventLog(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

std::uint64_t EventLog::Publish(KvTier tier, KvEvent::Kind kind, const BlockKey& key,
                                std::uint64_t parent_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() == capacity_) events_.pop_front();
  const std::uint64_t seq = next_seq_++;
  events_.push_back(KvEvent{seq, tier, kind, key, parent_hash});
  return seq;
}

absl::StatusOr<std::vector<KvEvent>> EventLog::ReadAfter(std::uint64_t after_seq,
                                                         std::size_t max_events) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t oldest = events_.empty() ? next_seq_ : events_.front().seq;
  if (after_seq + 1 < oldest) {
    return absl::OutOfRangeError(absl::StrCat("events ", after_seq + 1, "..", oldest - 1,
                                              " were dropped; resync from a snapshot"));
  }
  if (after_seq >= next_seq_) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq ", after_seq, " is ahead of the log (last ", next_seq_ - 1,
                     "); the store restarted? resync from a snapshot"));
  }
  std::vector<KvEvent> out;
  const std::size_t first = static_cast<std::size_t>(after_seq + 1 - oldest);
  for (std::size_t i = first; i < events_.size() && out.size() < max_events; ++i) {
    out.push_back(events_[i]);
  }
  return out;
}

std::uint64_t EventLog::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_seq_ - 1;
}

}  // namespace tandem::kv
