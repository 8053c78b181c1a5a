#include <cmath>
#include <vector>

#include "deepseek_v3/deepseek_v3_router.h"
#include "gtest/gtest.h"

namespace tandem::model::internal {
namespace {

float Logit(float p) { return std::log(p / (1.0f - p)); }

DeepseekV3Config Routing() {
  DeepseekV3Config c;
  c.n_routed_experts = 8;
  c.n_group = 4;  // groups {0,1} {2,3} {4,5} {6,7}
  c.topk_group = 2;
  c.num_experts_per_tok = 3;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5f;
  return c;
}

struct Routed {
  std::vector<int> experts;
  std::vector<float> weights;
};

Routed Route(const DeepseekV3Config& c, const std::vector<float>& scores,
             const std::vector<float>& bias) {
  std::vector<float> logits;
  for (float s : scores) logits.push_back(Logit(s));
  Routed r{std::vector<int>(c.num_experts_per_tok), std::vector<float>(c.num_experts_per_tok)};
  RouteToken(c, logits, bias, r.experts, r.weights);
  return r;
}

const std::vector<float> kScores = {0.9f, 0.05f, 0.6f, 0.5f, 0.3f, 0.2f, 0.8f, 0.7f};

TEST(DeepseekRouter, BestExpertOfALosingGroupIsNotChosen) {
  // Group scores (top-2 sums): 0.95, 1.1, 0.5, 1.5 -> groups 3 and 1 survive, so expert 0
  // (the single best score) is out.
  const Routed r = Route(Routing(), kScores, std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.experts, (std::vector<int>{6, 7, 2}));
  const float sum = 0.8f + 0.7f + 0.6f;
  EXPECT_NEAR(r.weights[0], 0.8f / sum * 2.5f, 1e-6);
  EXPECT_NEAR(r.weights[2], 0.6f / sum * 2.5f, 1e-6);
}

TEST(DeepseekRouter, BiasSteersSelectionButNotWeights) {
  std::vector<float> bias(8, 0.0f);
  bias[3] = 0.5f;  // expert 3 now ranks first; its weight still uses its unbiased 0.5
  const Routed r = Route(Routing(), kScores, bias);
  EXPECT_EQ(r.experts, (std::vector<int>{3, 6, 7}));
  const float sum = 0.5f + 0.8f + 0.7f;
  EXPECT_NEAR(r.weights[0], 0.5f / sum * 2.5f, 1e-6);
}

TEST(DeepseekRouter, WithoutRenormalisationWeightsAreScaledScores) {
  DeepseekV3Config c = Routing();
  c.norm_topk_prob = false;
  c.topk_group = 4;  // every group survives
  const Routed r = Route(c, kScores, std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.experts, (std::vector<int>{0, 6, 7}));
  EXPECT_NEAR(r.weights[0], 0.9f * 2.5f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.8f * 2.5f, 1e-6);
}

}  // namespace
}  // namespace tandem::model::internal
