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

TEST(RouterConfigTest, ListenAddressesAreHostAndPort) {
  auto ok = ParseHostPort("http-listen", "0.0.0.0:8000");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->host, "0.0.0.0");
  EXPECT_EQ(ok->port, 8000);
  auto v6 = ParseHostPort("http-listen", "[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  for (const char* bad : {"8000", ":8000", "host:", "host:70000", "host:x"}) {
    auto st = ParseHostPort("http-listen", bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("--http-listen"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace tandem::router
