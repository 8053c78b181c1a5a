#include "tandem/config/flags.h"

#include <map>

#include "gtest/gtest.h"

namespace tandem::config {
namespace {

struct Config {
  std::string model = "default-model";
  int port = 8000;
  std::int64_t kv_bytes = 1 << 20;
  double temperature = 1.0;
  bool verbose = false;
};

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> absl::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return absl::nullopt;
    return it->second;
  };
}

absl::Status ParseInto(Config* cfg, std::vector<const char*> args, EnvLookup env) {
  FlagSet flags("prog", "test");
  flags.String("model", &cfg->model, "model dir", "T_MODEL");
  flags.Int("port", &cfg->port, "port", "T_PORT");
  flags.Int64("kv-bytes", &cfg->kv_bytes, "kv bytes");
  flags.Double("temperature", &cfg->temperature, "temperature");
  flags.Bool("verbose", &cfg->verbose, "verbose", "T_VERBOSE");
  args.insert(args.begin(), "prog");
  return flags.Parse(static_cast<int>(args.size()), args.data(), env);
}

TEST(FlagSet, DefaultsEnvironmentAndFlagsInPrecedenceOrder) {
  Config cfg;
  ASSERT_TRUE(ParseInto(&cfg, {}, FakeEnv({})).ok());
  EXPECT_EQ(cfg.model, "default-model");
  EXPECT_EQ(cfg.port, 8000);

  Config from_env;
  ASSERT_TRUE(ParseInto(&from_env, {}, FakeEnv({{"T_MODEL", "/m"}, {"T_PORT", "9"}})).ok());
  EXPECT_EQ(from_env.model, "/m");
  EXPECT_EQ(from_env.port, 9);

  Config explicit_wins;
  ASSERT_TRUE(ParseInto(&explicit_wins, {"--port=10", "--model", "/x"},
                        FakeEnv({{"T_MODEL", "/m"}, {"T_PORT", "9"}}))
                  .ok());
  EXPECT_EQ(explicit_wins.model, "/x");
  EXPECT_EQ(explicit_wins.port, 10);
}

TEST(FlagSet, ParsesEveryType) {
  Config cfg;
  ASSERT_TRUE(
      ParseInto(&cfg, {"--kv-bytes=8589934592", "--temperature", "0.25", "--verbose"}, FakeEnv({}))
          .ok());
  EXPECT_EQ(cfg.kv_bytes, 8589934592LL);
  EXPECT_DOUBLE_EQ(cfg.temperature, 0.25);
  EXPECT_TRUE(cfg.verbose);
  Config neg;
  neg.verbose = true;
  ASSERT_TRUE(ParseInto(&neg, {"--no-verbose"}, FakeEnv({})).ok());
  EXPECT_FALSE(neg.verbose);
}

TEST(FlagSet, ErrorsNameTheFlagOrVariable) {
  Config cfg;
  auto st = ParseInto(&cfg, {"--port=abc"}, FakeEnv({}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--port"), std::string::npos);

  st = ParseInto(&cfg, {"--bogus=1"}, FakeEnv({}));
  EXPECT_NE(st.message().find("unknown flag --bogus"), std::string::npos);

  st = ParseInto(&cfg, {"--model"}, FakeEnv({}));
  EXPECT_NE(st.message().find("needs a value"), std::string::npos);

  st = ParseInto(&cfg, {}, FakeEnv({{"T_PORT", "x"}}));
  EXPECT_NE(st.message().find("T_PORT"), std::string::npos);

  st = ParseInto(&cfg, {"--port=1", "--port=2"}, FakeEnv({}));
  EXPECT_NE(st.message().find("twice"), std::string::npos);
}

TEST(FlagSet, HelpListsFlagsDefaultsAndEnvironment) {
  Config cfg;
  FlagSet flags("prog", "does things");
  flags.Int("port", &cfg.port, "listen port", "T_PORT");
  const char* argv[] = {"prog", "--help"};
  ASSERT_TRUE(flags.Parse(2, argv, FakeEnv({})).ok());
  EXPECT_TRUE(flags.help_requested());
  const std::string help = flags.Help();
  EXPECT_NE(help.find("--port"), std::string::npos);
  EXPECT_NE(help.find("8000"), std::string::npos);
  EXPECT_NE(help.find("T_PORT"), std::string::npos);
}

}  // namespace
}  // namespace tandem::config
