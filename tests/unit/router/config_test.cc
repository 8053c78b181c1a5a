#include "gtest/gtest.h"
#include "router_config.h"

namespace tandem::router {
namespace {

TEST(RouterConfigTest, FlagsBeatEnvironmentWhichBeatsDefaults) {
  RouterConfig cfg;
  config::FlagSet flags("tandem-router", "");
  BindRouterFlags(&flags, &cfg);
  const char* argv[] = {"tandem-router", "--max-in-flight=7", "--model", "/m/stories260K/"};
  auto env = [](const std::string& name) -> absl::optional<std::string> {
    if (name == "TANDEM_ROUTER_MAX_IN_FLIGHT") return std::string("9");
    if (name == "TANDEM_ROUTER_WORKER_LEASE_MS") return std::string("1500");
    return absl::nullopt;
  };
  ASSERT_TRUE(flags.Parse(4, argv, env).ok());
  EXPECT_EQ(cfg.max_in_flight, 7);
  EXPECT_EQ(cfg.worker_lease_ms, 1500);
  EXPECT_EQ(cfg.request_timeout_ms, 600000);
  EXPECT_EQ(cfg.kv_block_size, 16);
  EXPECT_EQ(ServedModelName(cfg), "stories260K");
  cfg.served_model_name = "tiny";
  EXPECT_EQ(ServedModelName(cfg), "tiny");
}

}  // namespace
}  // namespace tandem::router
