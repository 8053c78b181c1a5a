// Runs the tandem-generate binary end to end: exact greedy agreement with llama2.c on every
// fixture line, and the command-line contract (exit codes, messages, environment fallback).

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"
#include "tandem/kernels/backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using testing::RunProcess;

const std::filesystem::path kShared(TANDEM_SHARED_DIR);
const std::string kBinary = TANDEM_GENERATE_BIN;

std::string ModelDir() { return (kShared / "models" / "stories260K").string(); }

#define SKIP_WITHOUT_SHARED()                                                        \
  if (!std::filesystem::exists(kShared / "models" / "stories260K" / "model.bin")) {  \
    GTEST_SKIP() << "stories260K not found under " << kShared                       \
                 << " (configure TANDEM_SHARED_DIR to the directory holding models/)"; \
  }

// The ids on the line that starts with `label` ("prompt_ids: 1 2 3").
std::vector<int> IdsAfter(const std::string& out, const std::string& label) {
  std::vector<int> ids;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::ConsumePrefix(&line, label)) continue;
    for (absl::string_view tok : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      int v = 0;
      EXPECT_TRUE(absl::SimpleAtoi(tok, &v)) << "bad id '" << tok << "'";
      ids.push_back(v);
    }
    return ids;
  }
  ADD_FAILURE() << "no line starting with '" << label << "' in:\n" << out;
  return ids;
}

TEST(GenerateCliTest, GreedyMatchesLlama2cOnEveryFixtureLine) {
  SKIP_WITHOUT_SHARED();
  std::ifstream in(kShared / "fixtures" / "stories260K_greedy.jsonl");
  ASSERT_TRUE(in) << "fixture file missing";
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json fx = nlohmann::json::parse(line);
    const std::string prompt = fx.at("prompt");
    const auto prompt_ids = fx.at("prompt_ids").get<std::vector<int>>();
    const auto output_ids = fx.at("output_ids").get<std::vector<int>>();
    // run.c runs `steps` positions; the last prompt position already yields the first output.
    const int max_tokens = fx.at("steps").get<int>() - static_cast<int>(prompt_ids.size()) + 1;
    SCOPED_TRACE(prompt);
    // The best kernels this CPU runs, and the portable copy every x86-64 CPU runs.
    for (const char* isa : {"auto", "generic"}) {
      SCOPED_TRACE(isa);
      const auto r = RunProcess({kBinary, "--model", ModelDir(), "--prompt", prompt,
                                 "--max-tokens", std::to_string(max_tokens), "--temperature", "0",
                                 "--threads", "1", "--cpu-isa", isa, "--print-ids"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(IdsAfter(r.out, "prompt_ids: "), prompt_ids);
      EXPECT_EQ(IdsAfter(r.out, "output_ids: "), output_ids);
      EXPECT_EQ(r.out.substr(0, r.out.find("\nprompt_ids: ")), fx.at("text").get<std::string>());
    }
    ++cases;
  }
  EXPECT_GE(cases, 10);
}

TEST(GenerateCliTest, SeededSamplingIsReproducible) {
  SKIP_WITHOUT_SHARED();
  const std::vector<std::string> args = {kBinary, "--model", ModelDir(), "--prompt", "The cat",
                                         "--max-tokens", "40", "--temperature", "0.9",
                                         "--top-p", "0.9", "--seed", "11", "--print-ids"};
  const auto a = RunProcess(args);
  const auto b = RunProcess(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  std::vector<std::string> other = args;
  other[12] = "12";  // the seed
  const auto c = RunProcess(other);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(IdsAfter(a.out, "output_ids: "), IdsAfter(c.out, "output_ids: "));
}

TEST(GenerateCliTest, ModelFromEnvironment) {
  SKIP_WITHOUT_SHARED();
  const auto r = RunProcess({kBinary, "--prompt", "Once upon a time", "--max-tokens", "3",
                             "--temperature", "0", "--print-ids"},
                            {"TANDEM_MODEL=" + ModelDir()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(IdsAfter(r.out, "output_ids: "), (std::vector<int>{432, 383, 286}));
}

TEST(GenerateCliTest, BadFlagsExitWithStatus2AndAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model", "m", "--bogus"}, "unknown flag --bogus"},
      {{"--model", "m", "--max-tokens", "many"}, "--max-tokens"},
      {{"--model", "m", "--max-tokens", "0"}, "--max-tokens must be >= 1"},
      {{"--prompt", "hi"}, "--model is required"},
      {{"--model", "m", "--max-tokens"}, "needs a value"},
      {{"--model", "m", "stray"}, "unexpected argument 'stray'"},
      {{"--model", "m", "--cpu-isa", "avx1024"},
       "--cpu-isa avx1024: this binary and CPU run auto, generic"},
      {{"--model", "m", "--bf16-matmul", "bf16"},
       "--bf16-matmul bf16: one of auto, f32, amx, avx512bf16"},
      // Either this machine lacks AMX (and says so) or AMX cannot run beside the generic copy.
      {{"--model", "m", "--bf16-matmul", "amx", "--cpu-isa", "generic"},
       kernels::IsAmxBf16Available() ? "--bf16-matmul amx runs beside the avx512 kernels"
                                     : "--bf16-matmul amx: needs a CPU with AMX-TILE"},
      {{"--model", "m", "--bf16-matmul", "avx512bf16", "--cpu-isa", "generic"},
       kernels::IsAvx512Bf16Available() ? "--bf16-matmul avx512bf16 runs beside the avx512 kernels"
                                        : "--bf16-matmul avx512bf16: needs a CPU with AVX512-BF16"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {kBinary};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = RunProcess(args);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_THAT(r.err, HasSubstr(c.message));
  }
}

TEST(GenerateCliTest, HelpListsFlagsAndEnvironment) {
  const auto r = RunProcess({kBinary, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--model"));
  EXPECT_THAT(r.out, HasSubstr("TANDEM_MODEL"));
  EXPECT_THAT(r.out, HasSubstr("--print-ids"));
}

TEST(GenerateCliTest, RuntimeErrorsExitWithStatus1) {
  const auto missing = RunProcess({kBinary, "--model", "/nonexistent/model", "--prompt", "x"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/model"));
}

TEST(GenerateCliTest, InvalidRequestsOnARealModelExitWithStatus1) {
  SKIP_WITHOUT_SHARED();
  const auto too_long = RunProcess({kBinary, "--model", ModelDir(), "--prompt", "x",
                                    "--max-tokens", "5000", "--temperature", "0"});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err, HasSubstr("exceeds the model context"));
  const auto bad_top_p = RunProcess({kBinary, "--model", ModelDir(), "--prompt", "x",
                                     "--top-p", "0"});
  EXPECT_EQ(bad_top_p.exit_code, 1);
  EXPECT_THAT(bad_top_p.err, HasSubstr("top_p"));
}

}  // namespace
}  // namespace tandem
