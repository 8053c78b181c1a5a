#include "tandem/config/service_main.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tandem/config/build_info.h"

namespace tandem::config {
namespace {

TEST(ServiceMain, ParseServiceFlagsStopsForHelpAndBadFlagsOnly) {
  int port = 1;
  auto run = [&](std::vector<const char*> args) {
    FlagSet flags("prog", "test");
    flags.Int("port", &port, "port");
    args.insert(args.begin(), "prog");
    return ParseServiceFlags(flags, static_cast<int>(args.size()), args.data(),
                             [](const std::string&) { return absl::optional<std::string>(); });
  };
  EXPECT_EQ(run({"--port=5"}), absl::nullopt);
  EXPECT_EQ(port, 5);
  EXPECT_EQ(run({"--help"}), absl::optional<int>(0));
  EXPECT_EQ(run({"--version"}), absl::optional<int>(0));
  EXPECT_EQ(run({"--port=x"}), absl::optional<int>(2));
  EXPECT_EQ(run({"--nope"}), absl::optional<int>(2));
}

TEST(ServiceMain, VersionLineNamesProgramVersionAndCommit) {
  const BuildInfo& b = GetBuildInfo();
  EXPECT_FALSE(b.version.empty());
  EXPECT_FALSE(b.git_commit.empty());
  const std::string line = VersionLine("tandem-router");
  EXPECT_EQ(line.rfind("tandem-router " + b.version, 0), 0u) << line;
  EXPECT_NE(line.find(b.git_commit), std::string::npos) << line;
}

TEST(ServiceMain, HostPortParsesAddressesAndNamesTheFlagOnError) {
  auto v4 = ParseHostPort("listen", "127.0.0.1:0");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 0);
  auto v6 = ParseHostPort("listen", "[::1]:8000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8000);
  for (const char* bad : {"8000", ":80", "host:", "host:70000", "host:-1", "host:x"}) {
    auto st = ParseHostPort("listen", bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("--listen"), std::string::npos) << bad;
  }
}

TEST(ServiceMain, PortFileHoldsAllPortsOnOneLine) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tandem_ports_" + std::to_string(::getpid()));
  ASSERT_TRUE(WritePortFile(path.string(), {8000, 50051}).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "8000 50051\n");
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::filesystem::remove(path);
  EXPECT_FALSE(WritePortFile("/nonexistent-dir/ports", {1}).ok());
}

}  // namespace
}  // namespace tandem::config
