#include "tandem/engine/sampling.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

using ::testing::ElementsAre;

constexpr TokenHistory kNoHistory{};

// Logits whose softmax (temperature 1) is exactly `probs`.
std::vector<float> LogitsFor(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

SamplingParams Random(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

TEST(SamplingTest, GreedyTakesArgmaxAndFirstIndexOnTies) {
  SamplingParams p = Random(0.0f);
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(SampleToken(p, 1, 0, kNoHistory, logits), 1);
  std::vector<float> all_equal(7, 0.5f);
  EXPECT_EQ(SampleToken(p, 1, 0, kNoHistory, all_equal), 0);
}

TEST(SamplingTest, TopKOneEqualsGreedyAtAnyTemperature) {
  const std::vector<float> logits = {0.3f, 1.2f, 1.1f, -0.5f, 1.19f, 0.0f};
  SamplingParams p = Random(5.0f);
  p.top_k = 1;
  for (std::uint64_t draw = 0; draw < 200; ++draw) {
    std::vector<float> l = logits;
    ASSERT_EQ(SampleToken(p, 42, draw, kNoHistory, l), 1);
  }
}

TEST(SamplingTest, TopKKeepsTheKMostLikelyRenormalised) {
  SamplingParams p = Random();
  p.top_k = 2;
  std::vector<float> logits = LogitsFor({0.1, 0.4, 0.2, 0.3});
  const std::vector<double> d = SamplingDistribution(p, kNoHistory, logits);
  EXPECT_NEAR(d[1], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(d[3], 0.3 / 0.7, 1e-6);
  EXPECT_EQ(d[0], 0.0);
  EXPECT_EQ(d[2], 0.0);
}

TEST(SamplingTest, TopPKeepsSmallestSetReachingP) {
  const std::vector<double> probs = {0.15, 0.5, 0.05, 0.3};
  SamplingParams p = Random();
  p.top_p = 0.75f;  // 0.5 < 0.75, 0.5 + 0.3 >= 0.75 -> {1, 3}
  std::vector<float> logits = LogitsFor(probs);
  std::vector<double> d = SamplingDistribution(p, kNoHistory, logits);
  EXPECT_NEAR(d[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(d[3], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(d[0], 0.0);
  EXPECT_EQ(d[2], 0.0);

  p.top_p = 0.85f;  // needs the third most likely too
  logits = LogitsFor(probs);
  d = SamplingDistribution(p, kNoHistory, logits);
  EXPECT_NEAR(d[0], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(d[2], 0.0);

  p.top_p = 0.1f;  // always keeps at least the most likely token
  logits = LogitsFor(probs);
  d = SamplingDistribution(p, kNoHistory, logits);
  EXPECT_EQ(d[1], 1.0);
}

TEST(SamplingTest, MinPDropsTokensBelowFractionOfTheMax) {
  SamplingParams p = Random();
  p.min_p = 0.2f;  // threshold 0.2 * 0.5 = 0.1: drops 0.05 only
  std::vector<float> logits = LogitsFor({0.15, 0.5, 0.05, 0.3});
  const std::vector<double> d = SamplingDistribution(p, kNoHistory, logits);
  EXPECT_EQ(d[2], 0.0);
  EXPECT_NEAR(d[0], 0.15 / 0.95, 1e-6);
  EXPECT_NEAR(d[1], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(d[3], 0.3 / 0.95, 1e-6);
}

TEST(SamplingTest, TemperatureScalesLogitsBeforeSoftmax) {
  SamplingParams p = Random(0.5f);
  std::vector<float> logits = {1.0f, 0.0f};
  const std::vector<double> d = SamplingDistribution(p, kNoHistory, logits);
  const double e = std::exp(2.0);  // logits / 0.5
  EXPECT_NEAR(d[0], e / (e + 1.0), 1e-9);
  EXPECT_NEAR(d[1], 1.0 / (e + 1.0), 1e-9);
}

TEST(SamplingTest, RepetitionPenaltyDividesPositiveMultipliesNegativeOverPromptAndOutput) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<std::int32_t> prompt = {0, 0, 4};
  const std::vector<std::int32_t> generated = {1};
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, -0.5f};
  ApplyPenalties(p, {prompt, generated}, logits);
  // Each token penalised once however often it occurs.
  EXPECT_THAT(logits, ElementsAre(1.0f, -4.0f, 1.0f, 0.5f, -1.0f));
}

TEST(SamplingTest, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<std::int32_t> prompt = {0, 2, 2};
  const std::vector<std::int32_t> generated = {3, 3, 1, 3};
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  ApplyPenalties(p, {prompt, generated}, logits);
  EXPECT_THAT(logits, ElementsAre(1.0f, 1.0f - 0.5f - 0.25f, 1.0f, 1.0f - 0.5f - 0.75f));
}

TEST(SamplingTest, PenaltiesChangeTheGreedyChoice) {
  SamplingParams p = Random(0.0f);
  p.frequency_penalty = 1.0f;
  const std::vector<std::int32_t> generated = {0};
  std::vector<float> logits = {1.0f, 0.5f};
  EXPECT_EQ(SampleToken(p, 0, 1, {{}, generated}, logits), 1);
}

TEST(SamplingTest, SeededSamplingIsReproducibleAndSeedDependent) {
  SamplingParams p = Random(1.0f);
  const std::vector<float> logits(32, 0.0f);  // uniform: every draw is informative
  auto draws = [&](std::uint64_t seed) {
    std::vector<std::int32_t> out;
    for (std::uint64_t i = 0; i < 64; ++i) {
      std::vector<float> l = logits;
      out.push_back(SampleToken(p, seed, i, kNoHistory, l));
    }
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
}

TEST(SamplingTest, TemperatureSamplingMatchesSoftmaxDistribution) {
  SamplingParams p = Random(0.7f);
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -1.0f};
  std::vector<double> expected(logits.size());
  double z = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) z += expected[i] = std::exp(logits[i] / 0.7);
  constexpr int kDraws = 40000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> l = logits;
    ++counts[SampleToken(p, 1234, i, kNoHistory, l)];
  }
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double q = expected[i] / z;
    const double sigma = std::sqrt(q * (1.0 - q) / kDraws);
    EXPECT_NEAR(static_cast<double>(counts[i]) / kDraws, q, 5 * sigma) << "token " << i;
  }
}

TEST(SamplingTest, UniformDrawsAreInUnitIntervalAndSpread) {
  double sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const double u = UniformForDraw(99, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(SamplingTest, MinusInfinityLogitsAreNeverSampled) {
  SamplingParams p = Random(1.0f);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::vector<float> l = {ninf, 0.0f, ninf, 0.0f};
    const std::int32_t t = SampleToken(p, 5, i, kNoHistory, l);
    ASSERT_TRUE(t == 1 || t == 3);
  }
}

TEST(SamplingTest, ValidationRejectsOutOfRangeParams) {
  auto invalid = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return ValidateSamplingParams(p, 10).code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, 10).ok());
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.temperature = -0.1f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.temperature = std::nanf(""); }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.top_p = 0.0f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.top_p = 1.5f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.min_p = -0.1f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.top_k = -1; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.repetition_penalty = 0.0f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.max_tokens = 0; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.stop_token_ids = {10}; }));
}

}  // namespace
}  // namespace tandem::engine
