#include "tandem/routing/prefill_speed.h"

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

constexpr double kFixed = 0.02;
constexpr double kPerToken = 1e-4;
double Seconds(double tokens) { return kFixed + tokens * kPerToken; }

TEST(PrefillSpeedFitTest, SeparatesTheFixedPartFromThePerTokenPart) {
  PrefillSpeedFit fit;
  EXPECT_EQ(fit.seconds_per_token(), 0);
  EXPECT_LT(fit.overhead_seconds(), 0);
  for (double tokens : {100.0, 4000.0, 250.0, 120.0, 9000.0, 300.0})
    fit.Add(tokens, Seconds(tokens));
  EXPECT_NEAR(fit.seconds_per_token(), kPerToken, 1e-9);
  EXPECT_NEAR(fit.overhead_seconds(), kFixed, 1e-9);
}

TEST(PrefillSpeedFitTest, ShortPrefillsDoNotMakeAWorkerLookSlowerPerToken) {
  // Two workers on the same hardware: one computes agents' short steps, the other long prompts.
  // The ratio seconds / tokens would put the first at 3x the second (0.02 s over 100 tokens).
  PrefillSpeedFit short_steps;
  PrefillSpeedFit long_prompts;
  for (int i = 0; i < 20; ++i) {
    const double step = 50.0 + 40.0 * (i % 4) * (i % 3);  // 50-290 tokens
    short_steps.Add(step, Seconds(step));
    const double prompt = 6000.0 + 1000.0 * (i % 4);
    long_prompts.Add(prompt, Seconds(prompt));
  }
  EXPECT_NEAR(short_steps.seconds_per_token(), kPerToken, 1e-9);
  // Long prompts alike in length (6,000-9,000) are not fitted: their ratio keeps the fixed part,
  // under 3% of them.
  EXPECT_NEAR(long_prompts.seconds_per_token(), kPerToken, 0.03 * kPerToken);
}

TEST(PrefillSpeedFitTest, AlikeLengthsGiveTheRatioUntilAFixedPartIsKnown) {
  PrefillSpeedFit fit(0.5);
  fit.Add(100, 1.0);
  EXPECT_DOUBLE_EQ(fit.seconds_per_token(), 0.01);
  EXPECT_LT(fit.overhead_seconds(), 0);
  fit.Add(100, 3.0);  // the means: 100 tokens in 2 s
  EXPECT_DOUBLE_EQ(fit.seconds_per_token(), 0.02);
  EXPECT_LT(fit.overhead_seconds(), 0);

  PrefillSpeedFit learnt;
  for (double tokens : {100.0, 4000.0, 250.0}) learnt.Add(tokens, Seconds(tokens));
  ASSERT_NEAR(learnt.overhead_seconds(), kFixed, 1e-9);
  // From here on alike lengths (the spread decays): the known fixed part stays out of the rate.
  for (int i = 0; i < 200; ++i) learnt.Add(150, Seconds(150));
  EXPECT_NEAR(learnt.seconds_per_token(), kPerToken, 1e-9);
}

TEST(PrefillSpeedFitTest, NoFixedPartWhenLongPromptsCostMoreThanInProportion) {
  PrefillSpeedFit fit;
  for (double tokens : {100.0, 1000.0, 8000.0, 400.0})
    fit.Add(tokens, tokens * kPerToken * (1 + tokens / 4000));
  EXPECT_EQ(fit.overhead_seconds(), 0);
  EXPECT_GT(fit.seconds_per_token(), kPerToken);
}

TEST(PrefillSpeedFitTest, IgnoresSamplesWithoutWorkOrTime) {
  PrefillSpeedFit fit;
  fit.Add(0, 0.5);
  fit.Add(100, 0);
  fit.Add(-5, 1);
  EXPECT_EQ(fit.seconds_per_token(), 0);
  fit.Add(100, 0.5);
  EXPECT_DOUBLE_EQ(fit.seconds_per_token(), 0.005);
}

}  // namespace
}  // namespace tandem::routing
