// The worker's wiring of the KV tiers: flags and environment into store options, the checks
// that refuse a bad configuration at startup, and the disk directory that keeps one model's KV
// from being served to another.
#include "kv_tiers.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>

#include "gtest/gtest.h"

namespace tandem::worker {
namespace {

namespace fs = std::filesystem;

absl::Status ParseFlags(KvTierConfig* config, std::vector<const char*> argv,
                        std::map<std::string, std::string> env = {}) {
  config::FlagSet flags("worker", "test");
  BindKvTierFlags(&flags, config);
  argv.insert(argv.begin(), "worker");
  return flags.Parse(static_cast<int>(argv.size()), argv.data(),
                     [&](const std::string& name) -> absl::optional<std::string> {
                       auto it = env.find(name);
                       if (it == env.end()) return absl::nullopt;
                       return it->second;
                     });
}

TEST(KvTiersTest, FlagsAndEnvironmentBecomeStoreOptions) {
  KvTierConfig c;
  ASSERT_TRUE(ParseFlags(&c, {"--kv-host-mb=64", "--kv-disk-dir=/d", "--kv-disk-mb=2",
                              "--kv-ttl-agent-s=60", "--kv-demotion-mb-per-s=0.5"},
                         {{"TANDEM_KV_TTL_CHAT_S", "30"}, {"TANDEM_KV_HOST_MB", "999"}})
                  .ok());
  EXPECT_EQ(c.host_mb, 64) << "an explicit flag wins over the environment";
  EXPECT_EQ(c.ttl_chat_s, 30);
  auto o = KvStoreOptions(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->host_capacity_bytes, 64u << 20);
  EXPECT_EQ(o->disk_path, "/d");
  EXPECT_EQ(o->disk_capacity_bytes, 2u << 20);
  EXPECT_EQ(o->demotion_rate_bytes_per_s, 1u << 19);
  EXPECT_EQ(o->ttl.ttl_ms[static_cast<int>(kv::TrafficClass::kChat)], 30000);
  EXPECT_EQ(o->ttl.ttl_ms[static_cast<int>(kv::TrafficClass::kAgent)], 60000);
  // No disk directory: no disk capacity, whatever --kv-disk-mb says.
  c.disk_dir.clear();
  EXPECT_EQ(KvStoreOptions(c)->disk_capacity_bytes, 0u);

  engine::EngineConfig e;
  c.device_low_watermark = 0.5;
  c.device_demotion_mb_per_s = 16;
  ApplyDeviceDemotion(c, &e);
  EXPECT_EQ(e.device_low_watermark, 0.5);
  EXPECT_EQ(e.device_demotion_rate_bytes_per_s, 16u << 20);
  EXPECT_EQ(e.device_demotion_burst_bytes, 1u << 20);
}

TEST(KvTiersTest, RefusesConfigurationsThatCannotWork) {
  const std::vector<std::function<void(KvTierConfig*)>> bad = {
      [](KvTierConfig* c) { c->host_mb = -1; },
      [](KvTierConfig* c) { c->disk_dir = "/d", c->disk_mb = 0; },
      [](KvTierConfig* c) { c->demotion_mb_per_s = 0; },
      [](KvTierConfig* c) { c->demotion_burst_mb = -1; },
      [](KvTierConfig* c) { c->device_low_watermark = 0; },
      [](KvTierConfig* c) { c->device_low_watermark = 1.5; },
      [](KvTierConfig* c) { c->device_demotion_mb_per_s = 0; },
      [](KvTierConfig* c) { c->ttl_agent_s = 0; },
      [](KvTierConfig* c) { c->disk_sync_ms = -1; },
      [](KvTierConfig* c) { c->default_traffic_class = "batch"; },
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    KvTierConfig c;
    bad[i](&c);
    EXPECT_EQ(KvStoreOptions(c).status().code(), absl::StatusCode::kInvalidArgument) << i;
    model::ModelConfig m;
    EXPECT_FALSE(OpenKvTiers(c, m, {1, 1}, 16).ok()) << i;
  }
}

TEST(KvTiersTest, DiskDirectoryIsPerModelAndKvShape) {
  model::ModelConfig m;
  m.name = "stories 260K/v1";
  m.vocab_size = 512;
  const model::KvLayout layout{5, 64};
  const std::string base = KvDiskSubdir(m, layout, 16);
  EXPECT_EQ(base, KvDiskSubdir(m, layout, 16)) << "stable across restarts";
  EXPECT_EQ(base.rfind("stories_260K_v1-", 0), 0u) << base;  // a safe file name
  EXPECT_NE(base, KvDiskSubdir(m, layout, 32));
  EXPECT_NE(base, KvDiskSubdir(m, {6, 64}, 16));
  EXPECT_NE(base, KvDiskSubdir(m, {5, 128}, 16));
  model::ModelConfig other = m;
  other.vocab_size = 513;
  EXPECT_NE(base, KvDiskSubdir(other, layout, 16));
}

TEST(KvTiersTest, OpensNothingWithoutAHostTierAndTheDiskTierInItsModelsDirectory) {
  model::ModelConfig m;
  m.name = "tiny";
  m.vocab_size = 32;
  KvTierConfig off;
  off.host_mb = 0;
  auto none = OpenKvTiers(off, m, {1, 4}, 4);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);

  const fs::path dir = fs::temp_directory_path() /
                       ("tandem_kv_tiers_test_" + std::to_string(::getpid()));
  KvTierConfig on;
  on.host_mb = 1;
  on.disk_dir = dir.string();
  on.disk_mb = 1;
  {
    auto store = OpenKvTiers(on, m, {1, 4}, 4);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_NE(*store, nullptr);
    EXPECT_TRUE(fs::is_directory(dir / KvDiskSubdir(m, {1, 4}, 4)));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace tandem::worker
