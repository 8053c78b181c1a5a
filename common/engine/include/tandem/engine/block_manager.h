#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/model.h"

namespace tandem::engine {

// What the KV-cache tiers and the router learn about the device cache: a full block became
// reusable under `block_hash`, or that block's memory was reclaimed.
struct KvCacheEvent {
  enum class Kind : std::uint8_t { kStored, kEvicted };
  Kind kind = Kind::kStored;
  std::uint64_t block_hash = 0;
  std::uint64_t parent_hash = 0;  // a sequence's first block: its BlockTable::root (0 unsalted)
  std::int32_t block_id = 0;
};
using KvCacheEventListener = std::function<void(const KvCacheEvent&)>;

// A hashed block about to be reused for other data: the last chance to copy its KV to a lower
// tier. `data` is the block's memory (all layers), valid only during the call.
struct EvictedBlock {
  std::uint64_t block_hash = 0;
  std::uint64_t parent_hash = 0;
  std::uint8_t tag = 0;  // BlockTable::tag of the sequence that registered it
  std::span<const float> data;
};
using EvictionSpill = std::function<void(const EvictedBlock&)>;
// Copies a cached block to a lower tier ahead of its eviction; true when the copy is there (then
// its eviction skips the spill).
using DemotionCopy = std::function<bool(const EvictedBlock&)>;

// One sequence's view of the pool. Owned by the sequence, mutated only by the BlockManager.
struct BlockTable {
  std::vector<std::int32_t> blocks;
  // Chained hashes of the leading full blocks already registered (or reused): hashes[i] belongs
  // to blocks[i]. Blocks past hashes.size() are private to the sequence.
  std::vector<std::uint64_t> hashes;
  // Opaque to the BlockManager, stored with the blocks this table registers and handed back on
  // eviction (the engine keeps the request's traffic class here).
  std::uint8_t tag = 0;
  // Parent hash of the first block (SamplingParams::kv_hash_root): blocks are found and
  // registered under chains that start from it.
  std::uint64_t root = 0;
};

struct BlockManagerConfig {
  int block_size = 16;
  int num_blocks = 0;
  bool enable_prefix_caching = true;
};

// The paged KV pool: owns the memory (laid out as model::KvStorage describes), hands out blocks,
// reference-counts blocks shared between sequences, and keeps freed full blocks cached under
// their chained hash (evictable, least recently freed first) until their memory is needed.
class BlockManager {
 public:
  static absl::StatusOr<std::unique_ptr<BlockManager>> Create(const BlockManagerConfig& config,
                                                              const model::KvLayout& layout,
                                                              kernels::Backend* backend);
  ~BlockManager();
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  const model::KvStorage& storage() const { return storage_; }
  int block_size() const { return config_.block_size; }
  int num_blocks() const { return config_.num_blocks; }
  // Blocks an allocation can take: never used, or cached with no user (evictable).
  int num_free_blocks() const { return static_cast<int>(free_.size() + evictable_.size()); }
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  // Blocks holding KV (in use or cached), as a fraction of the pool: what the device watermark
  // compares against. Cached blocks count because their memory is only reclaimed by eviction.
  double used_fraction() const {
    return 1.0 - static_cast<double>(free_.size()) / config_.num_blocks;
  }
  int BlocksFor(int num_tokens) const {
    return (num_tokens + config_.block_size - 1) / config_.block_size;
  }

  // Called synchronously, on the thread driving the engine, as blocks are stored and evicted;
  // keep it cheap (e.g. append to a queue the publisher drains).
  void SetEventListener(KvCacheEventListener listener) { listener_ = std::move(listener); }
  // Called synchronously before a cached block's memory is reused (before its kEvicted event),
  // unless the block was already demoted by DemoteColdest.
  void SetEvictionSpill(EvictionSpill spill) { spill_ = std::move(spill); }

  // Hands the coldest (least recently freed) unreferenced cached blocks not demoted yet to
  // `copy`, up to `max_blocks`, stopping at the first copy that fails (tier full, rate limit).
  // Blocks copied are marked so their eviction does not copy them again. Returns how many.
  int DemoteColdest(int max_blocks, const DemotionCopy& copy);
  std::int64_t num_demoted_evictions() const { return num_demoted_evictions_; }

  // The memory of one block (all layers, KvStorage layout). For copying KV in and out.
  std::span<float> BlockData(std::int32_t block) const {
    return {storage_.base + static_cast<std::int64_t>(block) * storage_.block_floats(),
            static_cast<std::size_t>(storage_.block_floats())};
  }

  // A cached prefix of `tokens` a new sequence can reuse: full blocks only, and never the block
  // holding the last token (one token must be computed to produce logits).
  struct PrefixMatch {
    std::vector<std::int32_t> blocks;
    std::vector<std::uint64_t> hashes;
    int num_evictable = 0;  // of `blocks`, how many currently have no user (count as free)
  };
  // `root`: the chain's first parent (BlockTable::root).
  PrefixMatch FindCachedPrefix(std::span<const std::int32_t> tokens, std::uint64_t root = 0) const;

  // Attaches a match to an empty table (reference counts up); returns the cached token count.
  int AcquirePrefix(const PrefixMatch& match, BlockTable* table);

  // Grows `table` to hold `num_tokens` tokens. All or nothing: ResourceExhausted leaves the
  // table and pool unchanged.
  absl::Status EnsureCapacity(BlockTable* table, int num_tokens);

  // Registers the full blocks among the first `num_computed` tokens of `tokens` (whose KV is now
  // written) in the prefix cache. No-op without prefix caching.
  void CommitComputedBlocks(std::span<const std::int32_t> tokens, int num_computed,
                            BlockTable* table);

  // Drops the sequence's references and empties the table. Tail blocks are released first so
  // they are evicted before the shared prefix they extend.
  void Release(BlockTable* table);

 private:
  struct BlockMeta {
    int ref_count = 0;
    bool hashed = false;
    std::uint64_t hash = 0;
    std::uint64_t parent_hash = 0;
    std::uint8_t tag = 0;
    bool demoted = false;  // its KV is already in a lower tier: eviction copies nothing
    std::list<std::int32_t>::iterator lru_pos;  // valid while evictable
  };

  BlockManager(const BlockManagerConfig& config, model::KvStorage storage,
               kernels::Backend* backend);
  std::int32_t TakeBlock();
  void Emit(KvCacheEvent::Kind kind, const BlockMeta& meta, std::int32_t block);

  BlockManagerConfig config_;
  model::KvStorage storage_;
  kernels::Backend* backend_;
  std::vector<BlockMeta> meta_;
  std::vector<std::int32_t> free_;            // never-hashed blocks, used as a stack
  std::list<std::int32_t> evictable_;         // hashed, unused; front = least recently freed
  absl::flat_hash_map<std::uint64_t, std::int32_t> cached_;  // hash -> block
  KvCacheEventListener listener_;
  EvictionSpill spill_;
  std::int64_t num_demoted_evictions_ = 0;  // evictions that skipped the spill: demoted earlier
};

}  // namespace tandem::engine
