// The llama2.c reference's own greedy outputs on stories260K, reproduced token for token by
// driving Model::Forward directly (prefill in one chunk, then one token per step).
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llama_test_util.h"
#include "nlohmann/json.hpp"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::Argmax;
using testing::KvPool;

struct FixtureLine {
  std::string prompt;
  int steps = 0;
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> output_ids;
};

std::vector<FixtureLine> ReadFixture() {
  std::vector<FixtureLine> lines;
  std::ifstream in(testing::GreedyFixturePath());
  std::string text;
  while (std::getline(in, text)) {
    if (text.empty()) continue;
    const auto j = nlohmann::json::parse(text);
    lines.push_back({j["prompt"], j["steps"], j["prompt_ids"], j["output_ids"]});
  }
  return lines;
}

// What the reference generation loop does: positions [0, steps) run, prompt included; stops
// early, without emitting it, when the model picks BOS.
absl::StatusOr<std::vector<std::int32_t>> Greedy(Model& model, const FixtureLine& line) {
  const ModelConfig& config = model.config();
  const int block_size = 16;
  KvPool pool(model.kv_layout(), (config.max_position_embeddings + block_size - 1) / block_size,
              block_size);
  const auto table = KvPool::Blocks(0, pool.storage().num_blocks);

  std::vector<float> logits;
  SequenceChunk prefill{line.prompt_ids, 0, table, LogitsMode::kLast};
  if (auto s = model.Forward({&prefill, 1}, pool.storage(), &logits); !s.ok()) return s;
  std::vector<std::int32_t> out;
  while (true) {
    const std::int32_t next = Argmax(logits.data(), config.vocab_size);
    if (next == config.bos_token_id) break;
    out.push_back(next);
    const int pos = static_cast<int>(line.prompt_ids.size() + out.size()) - 1;
    if (pos >= line.steps) break;
    logits.clear();
    SequenceChunk step{std::span<const std::int32_t>(&out.back(), 1), pos, table,
                       LogitsMode::kLast};
    if (auto s = model.Forward({&step, 1}, pool.storage(), &logits); !s.ok()) return s;
  }
  return out;
}

class Llama2cGreedyTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_STORIES260K();
    backend_ = testing::MakeCpuBackend(GetParam());
    auto model = LoadModel(testing::Stories260KDir().string(), {.check_finite = true},
                           backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(Llama2cGreedyTest, ReproducesEveryFixtureLineTokenForToken) {
  const auto lines = ReadFixture();
  ASSERT_EQ(lines.size(), 12u) << "fixture at " << testing::GreedyFixturePath();
  for (const FixtureLine& line : lines) {
    auto out = Greedy(*model_, line);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), line.output_ids.size()) << "prompt: " << line.prompt;
    for (std::size_t i = 0; i < out->size(); ++i) {
      ASSERT_EQ((*out)[i], line.output_ids[i]) << "prompt: " << line.prompt << ", step " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Llama2cGreedyTest, ::testing::Values(false, true),
                         testing::CpuBackendName);

}  // namespace
}  // namespace tandem::model
