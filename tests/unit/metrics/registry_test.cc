#include "tandem/metrics/registry.h"

#include <cmath>

#include "exposition_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ParseExposition;

TEST(RegistryTest, CounterAndGaugeRenderHelpTypeAndValues) {
  Registry registry;
  auto* requests = registry.AddCounter("requests_total", "Requests served.", {"code"}).value();
  auto* depth = registry.AddGauge("queue_depth", "Waiting requests.").value();
  requests->WithLabels({"200"}).value()->Increment(3);
  requests->WithLabels({"500"}).value()->Increment();
  depth->WithLabels({}).value()->Set(7);
  depth->WithLabels({}).value()->Decrement();

  auto exp = ParseExposition(registry.RenderText());
  ASSERT_THAT(exp.errors, ::testing::IsEmpty());
  EXPECT_EQ(exp.type["requests_total"], "counter");
  EXPECT_EQ(exp.type["queue_depth"], "gauge");
  EXPECT_EQ(exp.help["requests_total"], "Requests served.");
  EXPECT_EQ(exp.Value("requests_total", {{"code", "200"}}), 3.0);
  EXPECT_EQ(exp.Value("requests_total", {{"code", "500"}}), 1.0);
  EXPECT_EQ(exp.Value("queue_depth"), 6.0);
  EXPECT_EQ(exp.samples.size(), 3u);
}

TEST(RegistryTest, HeadersPrecedeSamplesOfTheirFamily) {
  Registry registry;
  registry.AddCounter("a_total", "A.").value()->WithLabels({}).value()->Increment();
  registry.AddGauge("b", "B.").value();
  const std::string text = registry.RenderText();
  EXPECT_LT(text.find("# TYPE a_total counter\n"), text.find("a_total 1\n"));
  EXPECT_LT(text.find("a_total 1\n"), text.find("# HELP b B.\n"));
}

TEST(RegistryTest, UnlabelledFamilyRendersZeroBeforeFirstUse) {
  Registry registry;
  registry.AddCounter("events_total", "Events.").value();
  auto exp = ParseExposition(registry.RenderText());
  EXPECT_EQ(exp.Value("events_total"), 0.0);
}

TEST(RegistryTest, LabelValuesAndHelpAreEscapedAndRoundTrip) {
  Registry registry;
  const std::string nasty = "a\\b\"c\nd},e=\"f";
  const std::string help = "Line one\nback\\slash \"quoted\"";
  auto* family = registry.AddCounter("odd_total", help, {"path", "other"}).value();
  family->WithLabels({nasty, ""}).value()->Increment(2);

  const std::string text = registry.RenderText();
  // Every sample stays on one line: the newline in the value must be escaped.
  EXPECT_THAT(text, HasSubstr("path=\"a\\\\b\\\"c\\nd},e=\\\"f\""));
  EXPECT_THAT(text, HasSubstr("# HELP odd_total Line one\\nback\\\\slash \"quoted\"\n"));
  auto exp = ParseExposition(text);
  ASSERT_THAT(exp.errors, ::testing::IsEmpty());
  EXPECT_EQ(exp.help["odd_total"], help);
  EXPECT_EQ(exp.Value("odd_total", {{"path", nasty}, {"other", ""}}), 2.0);
}

TEST(RegistryTest, SpecialValuesUsePrometheusSpelling) {
  Registry registry;
  auto* g = registry.AddGauge("g", "G.", {"k"}).value();
  g->WithLabels({"inf"}).value()->Set(INFINITY);
  g->WithLabels({"ninf"}).value()->Set(-INFINITY);
  g->WithLabels({"nan"}).value()->Set(NAN);
  g->WithLabels({"frac"}).value()->Set(0.1);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr("g{k=\"inf\"} +Inf\n"));
  EXPECT_THAT(text, HasSubstr("g{k=\"ninf\"} -Inf\n"));
  EXPECT_THAT(text, HasSubstr("g{k=\"nan\"} NaN\n"));
  auto exp = ParseExposition(text);
  EXPECT_EQ(exp.Value("g", {{"k", "frac"}}), 0.1);  // Round-trips exactly.
}

TEST(RegistryTest, WithLabelsReturnsTheSameChildForTheSameValues) {
  Registry registry;
  auto* family = registry.AddCounter("c_total", "C.", {"a", "b"}).value();
  Counter* first = family->WithLabels({"x", "y"}).value();
  EXPECT_EQ(family->WithLabels({"x", "y"}).value(), first);
  EXPECT_NE(family->WithLabels({"y", "x"}).value(), first);
}

TEST(RegistryTest, WrongLabelCountIsRejected) {
  Registry registry;
  auto* family = registry.AddCounter("c_total", "C.", {"a", "b"}).value();
  EXPECT_EQ(family->WithLabels({"x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(family->WithLabels({"x", "y", "z"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistryTest, RemovedChildVanishesFromTheNextRenderingOthersStay) {
  Registry registry;
  auto* up = registry.AddGauge("worker_up", "Up.", {"worker", "role"}).value();
  up->WithLabels({"p0", "prefill"}).value()->Set(1);
  up->WithLabels({"d0", "decode"}).value()->Set(1);
  ASSERT_EQ(ParseExposition(registry.RenderText()).Find("worker_up").size(), 2u);

  EXPECT_TRUE(up->Remove({"p0", "prefill"}));
  auto exp = ParseExposition(registry.RenderText());
  ASSERT_THAT(exp.errors, ::testing::IsEmpty());
  EXPECT_THAT(exp.Find("worker_up", {{"worker", "p0"}}), ::testing::IsEmpty());
  EXPECT_EQ(exp.Value("worker_up", {{"worker", "d0"}}), 1.0);
  EXPECT_EQ(exp.type["worker_up"], "gauge");  // the family itself stays
  EXPECT_EQ(up->size(), 1u);

  EXPECT_FALSE(up->Remove({"p0", "prefill"}));  // already gone
  EXPECT_FALSE(up->Remove({"d0"}));              // wrong count: nothing removed
  EXPECT_EQ(up->size(), 1u);
}

TEST(RegistryTest, ChildCreatedAgainAfterRemovalStartsAtZero) {
  Registry registry;
  auto* requests = registry.AddCounter("served_total", "Served.", {"worker"}).value();
  requests->WithLabels({"w"}).value()->Increment(5);
  ASSERT_TRUE(requests->Remove({"w"}));
  requests->WithLabels({"w"}).value()->Increment();
  EXPECT_EQ(ParseExposition(registry.RenderText()).Value("served_total", {{"worker", "w"}}), 1.0);
}

TEST(RegistryTest, RemovingAHistogramChildRemovesAllItsSamples) {
  Registry registry;
  auto* latency = registry.AddHistogram("lat_seconds", "Latency.", {0.1, 1}, {"worker"}).value();
  latency->WithLabels({"a"}).value()->Observe(0.5);
  latency->WithLabels({"b"}).value()->Observe(2);
  ASSERT_TRUE(latency->Remove({"a"}));
  auto exp = ParseExposition(registry.RenderText());
  ASSERT_THAT(exp.errors, ::testing::IsEmpty());
  for (const char* sample : {"lat_seconds_bucket", "lat_seconds_sum", "lat_seconds_count"}) {
    EXPECT_THAT(exp.Find(sample, {{"worker", "a"}}), ::testing::IsEmpty()) << sample;
    EXPECT_THAT(exp.Find(sample, {{"worker", "b"}}), ::testing::Not(::testing::IsEmpty()))
        << sample;
  }
}

TEST(RegistryTest, RemoveMatchingTakesEverySeriesWithThatLabelValue) {
  Registry registry;
  auto* tier = registry.AddGauge("tier_blocks", "Blocks.", {"worker", "tier"}).value();
  for (const char* worker : {"w1", "w2"}) {
    for (const char* t : {"device", "host", "disk"}) tier->WithLabels({worker, t}).value()->Set(3);
  }
  EXPECT_EQ(tier->RemoveMatching("worker", "w1"), 3u);
  EXPECT_EQ(tier->RemoveMatching("worker", "w1"), 0u);
  EXPECT_EQ(tier->RemoveMatching("no_such_label", "w2"), 0u);
  auto exp = ParseExposition(registry.RenderText());
  EXPECT_THAT(exp.Find("tier_blocks", {{"worker", "w1"}}), ::testing::IsEmpty());
  EXPECT_EQ(exp.Find("tier_blocks", {{"worker", "w2"}}).size(), 3u);
  EXPECT_EQ(tier->RemoveMatching("tier", "host"), 1u);  // any label, not only the first
  EXPECT_EQ(tier->size(), 2u);
}

TEST(RegistryTest, InvalidNamesAreRejected) {
  Registry registry;
  for (const char* bad : {"", "1abc", "has-dash", "sp ace", "ünicode"}) {
    EXPECT_EQ(registry.AddCounter(bad, "x").status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(registry.AddCounter("ns:sub_total", "colons are fine in metric names").ok());
  EXPECT_EQ(registry.AddCounter("x1", "x", {"a:b"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("x2", "x", {"__reserved"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("x3", "x", {"a", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("x4", "x", {1.0}, {"le"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // "le" is only reserved for histograms.
  EXPECT_TRUE(registry.AddGauge("x5", "x", {"le"}).ok());
}

TEST(RegistryTest, CollidingSampleNamesAreRejected) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("dup", "x").ok());
  EXPECT_EQ(registry.AddGauge("dup", "x").status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddHistogram("latency", "x", {1.0}).ok());
  EXPECT_EQ(registry.AddCounter("latency_count", "x").status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddCounter("size_sum", "x").ok());
  EXPECT_EQ(registry.AddHistogram("size", "x", {1.0}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(RegistryTest, FailedRegistrationLeavesNoTrace) {
  Registry registry;
  EXPECT_FALSE(registry.AddHistogram("h", "x", {2.0, 1.0}).ok());
  EXPECT_TRUE(registry.AddHistogram("h", "x", {1.0, 2.0}).ok());
  EXPECT_FALSE(registry.AddCounter("c", "x", {"bad-name"}).ok());
  EXPECT_TRUE(registry.AddCounter("c", "x").ok());
  auto exp = ParseExposition(registry.RenderText());
  EXPECT_THAT(exp.errors, ::testing::IsEmpty());
  EXPECT_EQ(exp.type.size(), 2u);
}

TEST(CounterTest, NegativeAndNanDeltasAreDropped) {
  Counter counter;
  counter.Increment(2.5);
  counter.Increment(-1);
  counter.Increment(NAN);
  EXPECT_EQ(counter.Value(), 2.5);
}

}  // namespace
}  // namespace tandem::metrics
