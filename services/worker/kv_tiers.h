#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/config/flags.h"
#include "tandem/engine/engine.h"
#include "tandem/kv/tiered_kv_store.h"
#include "tandem/model/model.h"

namespace tandem::worker {

// Flags of the KV tiers below the device pool (host memory, RocksDB disk). Every field has a
// --kv-* flag and a TANDEM_KV_* environment fallback (BindKvTierFlags).
struct KvTierConfig {
  std::int64_t host_mb = 512;          // 0: no lower tiers (evicted blocks are gone)
  double host_low_watermark = 0.8;     // demotion to disk starts above this fraction
  std::string disk_dir;                // RocksDB root; empty: no disk tier
  std::int64_t disk_mb = 10240;
  double disk_low_watermark = 0.8;     // background eviction brings the disk back to this
  double demotion_mb_per_s = 64;       // sustained disk write rate of demotions
  double demotion_burst_mb = 4;        // most written at once
  std::int64_t ttl_chat_s = 7LL * 24 * 3600;
  std::int64_t ttl_agent_s = 3LL * 24 * 3600;
  std::int64_t disk_sync_ms = 1000;    // blocks written this long ago survive a crash (0: never)
  std::string default_traffic_class = "chat";  // for requests that name none
  // Above this fraction of the device pool holding KV, cold cached device blocks are copied to
  // host memory between engine steps (1: only when evicted), at most this fast.
  double device_low_watermark = 0.8;
  double device_demotion_mb_per_s = 256;
};

void BindKvTierFlags(config::FlagSet* flags, KvTierConfig* config);

// The store for `model`, or nullptr when host_mb is 0. The disk tier lives in a subdirectory
// named after the model and its KV layout, so a directory shared by workers of different models
// (or a changed checkpoint) never serves one model's KV to another.
absl::StatusOr<std::unique_ptr<kv::TieredKvStore>> OpenKvTiers(const KvTierConfig& config,
                                                              const model::ModelConfig& model,
                                                              const model::KvLayout& layout,
                                                              int block_size);

// The store options a config describes (validated; no I/O).
absl::StatusOr<kv::TieredKvStoreOptions> KvStoreOptions(const KvTierConfig& config);

// Sets the engine's device-tier demotion from the config (validated by KvStoreOptions).
void ApplyDeviceDemotion(const KvTierConfig& config, engine::EngineConfig* engine);

// The disk subdirectory for a model (see OpenKvTiers).
std::string KvDiskSubdir(const model::ModelConfig& model, const model::KvLayout& layout,
                         int block_size);

}  // namespace tandem::worker
