#include "tandem/engine/block_manager.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tandem/base/hash.h"

namespace tandem::engine {

absl::StatusOr<std::unique_ptr<BlockManager>> BlockManager::Create(
    const BlockManagerConfig& config, const model::KvLayout& layout, kernels::Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("BlockManager needs a backend");
  if (config.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be >= 1, got ", config.block_size));
  }
  if (config.num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_blocks must be >= 1, got ", config.num_blocks));
  }
  if (layout.num_layers < 1 || layout.floats_per_token < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model KV layout is empty: num_layers=", layout.num_layers,
        " floats_per_token=", layout.floats_per_token));
  }
  model::KvStorage storage;
  storage.num_blocks = config.num_blocks;
  storage.block_size = config.block_size;
  storage.num_layers = layout.num_layers;
  storage.floats_per_token = layout.floats_per_token;
  const auto total = static_cast<std::size_t>(storage.block_floats()) * config.num_blocks;
  storage.base = backend->AllocateFloats(total);
  if (storage.base == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("backend ", std::string(backend->name()), " could not allocate the KV pool (",
                     total * sizeof(float), " bytes)"));
  }
  return std::unique_ptr<BlockManager>(new BlockManager(config, storage, backend));
}

BlockManager::BlockManager(const BlockManagerConfig& config, model::KvStorage storage,
                           kernels::Backend* backend)
    : config_(config), storage_(storage), backend_(backend), meta_(config.num_blocks) {
  free_.reserve(config.num_blocks);
  // Stack order: block 0 is handed out first, which keeps tests' block ids readable.
  for (std::int32_t b = config.num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

BlockManager::~BlockManager() { backend_->Free(storage_.base); }

BlockManager::PrefixMatch BlockManager::FindCachedPrefix(std::span<const std::int32_t> tokens,
                                                         std::uint64_t root) const {
  PrefixMatch match;
  if (!config_.enable_prefix_caching || tokens.empty()) return match;
  const std::size_t bs = config_.block_size;
  const std::size_t reusable = (tokens.size() - 1) / bs;
  std::uint64_t parent = root;
  for (std::size_t i = 0; i < reusable; ++i) {
    const std::uint64_t h = ChainedBlockHash(parent, tokens.subspan(i * bs, bs));
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    match.blocks.push_back(it->second);
    match.hashes.push_back(h);
    if (meta_[it->second].ref_count == 0) ++match.num_evictable;
    parent = h;
  }
  return match;
}

int BlockManager::AcquirePrefix(const PrefixMatch& match, BlockTable* table) {
  for (std::size_t i = 0; i < match.blocks.size(); ++i) {
    const std::int32_t b = match.blocks[i];
    BlockMeta& m = meta_[b];
    if (m.ref_count++ == 0) evictable_.erase(m.lru_pos);
    table->blocks.push_back(b);
    table->hashes.push_back(match.hashes[i]);
  }
  return static_cast<int>(match.blocks.size()) * config_.block_size;
}

std::int32_t BlockManager::TakeBlock() {
  std::int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = evictable_.front();
    evictable_.pop_front();
    BlockMeta& m = meta_[b];
    cached_.erase(m.hash);
    if (m.demoted) {
      ++num_demoted_evictions_;
    } else if (spill_) {
      spill_({m.hash, m.parent_hash, m.tag, BlockData(b)});
    }
    Emit(KvCacheEvent::Kind::kEvicted, m, b);
    m.hashed = false;
    m.demoted = false;
  }
  meta_[b].ref_count = 1;
  return b;
}

absl::Status BlockManager::EnsureCapacity(BlockTable* table, int num_tokens) {
  const int needed = BlocksFor(num_tokens) - static_cast<int>(table->blocks.size());
  if (needed <= 0) return absl::OkStatus();
  if (needed > num_free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool has ", num_free_blocks(),
                                                     " free blocks, ", needed, " needed"));
  }
  for (int i = 0; i < needed; ++i) table->blocks.push_back(TakeBlock());
  return absl::OkStatus();
}

void BlockManager::CommitComputedBlocks(std::span<const std::int32_t> tokens, int num_computed,
                                        BlockTable* table) {
  if (!config_.enable_prefix_caching) return;
  const std::size_t bs = config_.block_size;
  const std::size_t full = static_cast<std::size_t>(num_computed) / bs;
  while (table->hashes.size() < full) {
    const std::size_t i = table->hashes.size();
    const std::uint64_t parent = i == 0 ? table->root : table->hashes[i - 1];
    const std::uint64_t h = ChainedBlockHash(parent, tokens.subspan(i * bs, bs));
    table->hashes.push_back(h);
    // Another sequence may have computed the same content first; keep its block as the cached
    // copy and let this one go back to the free list when released.
    if (cached_.contains(h)) continue;
    const std::int32_t b = table->blocks[i];
    BlockMeta& m = meta_[b];
    m.hashed = true;
    m.hash = h;
    m.parent_hash = parent;
    m.tag = table->tag;
    cached_.emplace(h, b);
    Emit(KvCacheEvent::Kind::kStored, m, b);
  }
}

int BlockManager::DemoteColdest(int max_blocks, const DemotionCopy& copy) {
  int demoted = 0;
  for (auto it = evictable_.begin(); it != evictable_.end() && demoted < max_blocks; ++it) {
    BlockMeta& m = meta_[*it];
    if (m.demoted) continue;
    if (!copy({m.hash, m.parent_hash, m.tag, BlockData(*it)})) break;
    m.demoted = true;
    ++demoted;
  }
  return demoted;
}

void BlockManager::Release(BlockTable* table) {
  for (auto it = table->blocks.rbegin(); it != table->blocks.rend(); ++it) {
    BlockMeta& m = meta_[*it];
    if (--m.ref_count > 0) continue;
    if (m.hashed) {
      m.lru_pos = evictable_.insert(evictable_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  table->blocks.clear();
  table->hashes.clear();
}

void BlockManager::Emit(KvCacheEvent::Kind kind, const BlockMeta& meta, std::int32_t block) {
  if (listener_) listener_({kind, meta.hash, meta.parent_hash, block});
}

}  // namespace tandem::engine
