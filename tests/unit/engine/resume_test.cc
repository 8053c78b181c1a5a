// A generation resumed elsewhere (its worker was lost): prompt + the tokens already delivered, the
// latter marked as output. The continuation must be token for token what the first engine would
// have produced, for greedy and seeded sampling with penalties over the generated tokens.
#include "engine_test_util.h"
#include "fake_model.h"
#include "gtest/gtest.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"

namespace tandem::engine {
namespace {

using testing::FakeModel;

class ResumeTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeModel* model) {
    EngineConfig cfg;
    cfg.block_size = 4;
    cfg.num_blocks = 64;
    auto e = Engine::Create(model, backend_.get(), cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
};

TEST_F(ResumeTest, AResumedRequestContinuesExactlyWhereTheFirstEngineWouldHave) {
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5, 9, 2};
  for (bool seeded : {false, true}) {
    SamplingParams p;
    p.max_tokens = 14;
    p.ignore_eos = true;
    if (seeded) {
      p.temperature = 0.9f;
      p.top_p = 0.95f;
      p.seed = 77;
      p.frequency_penalty = 0.5f;  // depends on which tokens count as generated
    } else {
      p.temperature = 0;
      p.repetition_penalty = 1.3f;
    }
    FakeModel first_model;
    auto first = MakeEngine(&first_model);
    auto whole = testing::RunAll(*first, {{"r", prompt, p}});
    ASSERT_TRUE(whole.ok()) << whole.status();
    const std::vector<std::int32_t>& all = whole->at("r").tokens;
    ASSERT_EQ(all.size(), 14u);
    for (int delivered : {1, 6, 13}) {
      SCOPED_TRACE(::testing::Message() << "seeded " << seeded << ", resumed after " << delivered);
      FakeModel second_model;
      auto second = MakeEngine(&second_model);
      std::vector<std::int32_t> resumed_prompt = prompt;
      resumed_prompt.insert(resumed_prompt.end(), all.begin(), all.begin() + delivered);
      ASSERT_TRUE(second->AddRequest("r", resumed_prompt, p, {.resumed_tokens = delivered}).ok());
      auto rest = testing::RunAll(*second, {});
      ASSERT_TRUE(rest.ok()) << rest.status();
      EXPECT_EQ(rest->at("r").tokens, std::vector<std::int32_t>(all.begin() + delivered, all.end()));
      EXPECT_EQ(rest->at("r").reason, FinishReason::kLength);
      EXPECT_EQ(rest->at("r").prompt_tokens, static_cast<int>(prompt.size()));
    }
  }
}

TEST_F(ResumeTest, ResumedTokensMustBeOutputThatMaxTokensStillAllows) {
  FakeModel model;
  auto engine = MakeEngine(&model);
  SamplingParams p = testing::Greedy(4);
  const std::vector<std::int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_EQ(engine->AddRequest("a", five, p, {.resumed_tokens = 4}).code(),
            absl::StatusCode::kInvalidArgument);  // nothing left to generate
  EXPECT_EQ(engine->AddRequest("b", five, p, {.resumed_tokens = 5}).code(),
            absl::StatusCode::kInvalidArgument);  // no prompt left
  EXPECT_EQ(engine->AddRequest("c", five, p, {.resumed_tokens = -1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->AddRequest("d", five, p, {.resumed_tokens = 3}).ok());
}

}  // namespace
}  // namespace tandem::engine
