#include "kv_tiers.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tandem/base/hash.h"

namespace tandem::worker {
namespace {

std::uint64_t MiB(double mb) { return static_cast<std::uint64_t>(std::llround(mb * (1 << 20))); }

}  // namespace

void BindKvTierFlags(config::FlagSet* f, KvTierConfig* c) {
  f->Int64("kv-host-mb", &c->host_mb,
           "host-memory KV tier in MiB (0: no host or disk tier)", "TANDEM_KV_HOST_MB");
  f->Double("kv-host-low-watermark", &c->host_low_watermark,
            "fraction of the host tier above which blocks are demoted to disk",
            "TANDEM_KV_HOST_LOW_WATERMARK");
  f->String("kv-disk-dir", &c->disk_dir, "RocksDB directory of the disk KV tier (empty: off)",
            "TANDEM_KV_DISK_DIR");
  f->Int64("kv-disk-mb", &c->disk_mb, "disk KV tier capacity in MiB", "TANDEM_KV_DISK_MB");
  f->Double("kv-disk-low-watermark", &c->disk_low_watermark,
            "fraction of the disk tier that background eviction brings it back to",
            "TANDEM_KV_DISK_LOW_WATERMARK");
  f->Double("kv-demotion-mb-per-s", &c->demotion_mb_per_s,
            "sustained rate of host-to-disk demotion writes (MiB/s)",
            "TANDEM_KV_DEMOTION_MB_PER_S");
  f->Double("kv-demotion-burst-mb", &c->demotion_burst_mb,
            "most demotion bytes written at once (MiB)", "TANDEM_KV_DEMOTION_BURST_MB");
  f->Int64("kv-ttl-chat-s", &c->ttl_chat_s, "retention of chat-class KV blocks (seconds)",
           "TANDEM_KV_TTL_CHAT_S");
  f->Int64("kv-ttl-agent-s", &c->ttl_agent_s, "retention of agent-class KV blocks (seconds)",
           "TANDEM_KV_TTL_AGENT_S");
  f->Int64("kv-disk-sync-ms", &c->disk_sync_ms,
           "flush disk-tier writes this often so they survive a crash (0: only at shutdown)",
           "TANDEM_KV_DISK_SYNC_MS");
  f->String("kv-default-traffic-class", &c->default_traffic_class,
            "traffic class (chat, agent) of requests that name none",
            "TANDEM_KV_DEFAULT_TRAFFIC_CLASS");
  f->Double("kv-device-low-watermark", &c->device_low_watermark,
            "fraction of the device KV pool above which cold cached blocks are copied to host "
            "memory ahead of eviction (1: only at eviction)",
            "TANDEM_KV_DEVICE_LOW_WATERMARK");
  f->Double("kv-device-demotion-rate-mb-s", &c->device_demotion_mb_per_s,
            "sustained rate of device-to-host demotion copies (MiB/s)",
            "TANDEM_KV_DEVICE_DEMOTION_RATE_MB_S");
}

void ApplyDeviceDemotion(const KvTierConfig& c, engine::EngineConfig* e) {
  e->device_low_watermark = c.device_low_watermark;
  const std::uint64_t rate = std::max<std::uint64_t>(1, MiB(c.device_demotion_mb_per_s));
  e->device_demotion_rate_bytes_per_s = rate;
  // A sixteenth of a second's worth at once: smooth, yet a step's copies are not one by one.
  e->device_demotion_burst_bytes = std::max<std::uint64_t>(1, rate / 16);
}

absl::StatusOr<kv::TieredKvStoreOptions> KvStoreOptions(const KvTierConfig& c) {
  if (c.host_mb < 0) return absl::InvalidArgumentError("--kv-host-mb must be >= 0");
  if (!c.disk_dir.empty() && c.disk_mb <= 0) {
    return absl::InvalidArgumentError("--kv-disk-mb must be > 0 with --kv-disk-dir");
  }
  if (!(c.demotion_mb_per_s > 0) || !(c.demotion_burst_mb > 0)) {
    return absl::InvalidArgumentError(
        "--kv-demotion-mb-per-s and --kv-demotion-burst-mb must be > 0");
  }
  if (!(c.device_low_watermark > 0 && c.device_low_watermark <= 1)) {
    return absl::InvalidArgumentError("--kv-device-low-watermark must be in (0, 1]");
  }
  if (!(c.device_demotion_mb_per_s > 0)) {
    return absl::InvalidArgumentError("--kv-device-demotion-rate-mb-s must be > 0");
  }
  if (c.ttl_chat_s <= 0 || c.ttl_agent_s <= 0) {
    return absl::InvalidArgumentError("--kv-ttl-chat-s and --kv-ttl-agent-s must be > 0");
  }
  if (c.disk_sync_ms < 0) return absl::InvalidArgumentError("--kv-disk-sync-ms must be >= 0");
  if (auto cls = kv::ParseTrafficClass(c.default_traffic_class); !cls.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-default-traffic-class: ", cls.status().message()));
  }
  kv::TieredKvStoreOptions o;
  o.host_capacity_bytes = static_cast<std::uint64_t>(c.host_mb) << 20;
  o.host_low_watermark = c.host_low_watermark;
  o.disk_path = c.disk_dir;
  o.disk_capacity_bytes = c.disk_dir.empty() ? 0 : static_cast<std::uint64_t>(c.disk_mb) << 20;
  o.disk_low_watermark = c.disk_low_watermark;
  o.demotion_rate_bytes_per_s = std::max<std::uint64_t>(1, MiB(c.demotion_mb_per_s));
  o.demotion_burst_bytes = std::max<std::uint64_t>(1, MiB(c.demotion_burst_mb));
  o.ttl.ttl_ms[static_cast<int>(kv::TrafficClass::kChat)] = c.ttl_chat_s * 1000;
  o.ttl.ttl_ms[static_cast<int>(kv::TrafficClass::kAgent)] = c.ttl_agent_s * 1000;
  o.disk_sync_interval_ms = c.disk_sync_ms;
  return o;
}

std::string KvDiskSubdir(const model::ModelConfig& model, const model::KvLayout& layout,
                         int block_size) {
  const std::string shape = absl::StrCat(model.name, "|", model.vocab_size, "|", layout.num_layers,
                                         "|", layout.floats_per_token, "|", block_size);
  const std::uint64_t h =
      StableHash64({reinterpret_cast<const std::uint8_t*>(shape.data()), shape.size()}, 0);
  std::string safe;
  for (char ch : model.name) {
    safe.push_back(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ||
                           ch == '.'
                       ? ch
                       : '_');
  }
  return absl::StrCat(safe.empty() ? "model" : safe, "-", absl::Hex(h, absl::kZeroPad16));
}

absl::StatusOr<std::unique_ptr<kv::TieredKvStore>> OpenKvTiers(const KvTierConfig& config,
                                                              const model::ModelConfig& model,
                                                              const model::KvLayout& layout,
                                                              int block_size) {
  auto options = KvStoreOptions(config);
  if (!options.ok()) return options.status();
  if (config.host_mb == 0) return std::unique_ptr<kv::TieredKvStore>();
  if (!options->disk_path.empty()) {
    const std::filesystem::path dir =
        std::filesystem::path(options->disk_path) / KvDiskSubdir(model, layout, block_size);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("--kv-disk-dir: cannot create ", dir.string(), ": ", ec.message()));
    }
    options->disk_path = dir.string();
  }
  return kv::TieredKvStore::Open(*options);
}

}  // namespace tandem::worker
