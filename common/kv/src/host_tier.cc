#include "tandem/kv/host_tier.h"

namespace tandem::kv {

void HostTier::Insert(const BlockKey& key, Entry entry) {
  used_bytes_ += entry.bytes->size();
  lru_.push_back(key);
  index_.emplace(key, Slot{std::move(entry), std::prev(lru_.end())});
}

const HostTier::Entry* HostTier::Find(const BlockKey& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &it->second.entry;
}

HostTier::Entry* HostTier::FindMutable(const BlockKey& key) {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &it->second.entry;
}

void HostTier::Touch(const BlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  lru_.splice(lru_.end(), lru_, it->second.lru_pos);
}

std::optional<HostTier::Entry> HostTier::Erase(const BlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  Entry entry = std::move(it->second.entry);
  lru_.erase(it->second.lru_pos);
  index_.erase(it);
  used_bytes_ -= entry.bytes->size();
  return entry;
}

std::vector<BlockKey> HostTier::ColdestFirst(std::size_t max_keys) const {
  std::vector<BlockKey> keys;
  for (auto it = lru_.begin(); it != lru_.end() && keys.size() < max_keys; ++it) {
    keys.push_back(*it);
  }
  return keys;
}

std::vector<BlockKey> HostTier::ExpiredKeys(std::int64_t now_unix_ms) const {
  std::vector<BlockKey> keys;
  for (const auto& [key, slot] : index_) {
    if (slot.entry.expiry_unix_ms <= now_unix_ms) keys.push_back(key);
  }
  return keys;
}

std::vector<BlockRecord> HostTier::Snapshot() const {
  std::vector<BlockRecord> records;
  records.reserve(index_.size());
  for (const auto& [key, slot] : index_) {
    records.push_back(BlockRecord{key, slot.entry.parent_hash, slot.entry.bytes->size(),
                                  slot.entry.expiry_unix_ms});
  }
  return records;
}

}  // namespace tandem::kv
