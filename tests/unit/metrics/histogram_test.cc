#include "tandem/metrics/histogram.h"

#include <cmath>

#include "exposition_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/metrics/registry.h"

namespace tandem::metrics {
namespace {

using testing::ParseExposition;

TEST(HistogramTest, RendersCumulativeBucketsInfSumAndCount) {
  Registry registry;
  auto* family = registry.AddHistogram("latency_seconds", "Latency.", {0.1, 0.5, 1}, {"route"})
                     .value();
  Histogram* h = family->WithLabels({"/v1"}).value();
  // One value exactly on a bound: buckets are "less than or equal".
  for (double v : {0.05, 0.1, 0.3, 0.7, 0.9, 5.0, 100.0}) h->Observe(v);

  auto exp = ParseExposition(registry.RenderText());
  ASSERT_THAT(exp.errors, ::testing::IsEmpty());
  EXPECT_EQ(exp.type["latency_seconds"], "histogram");
  auto bucket = [&](const std::string& le) {
    return exp.Value("latency_seconds_bucket", {{"route", "/v1"}, {"le", le}});
  };
  EXPECT_EQ(bucket("0.1"), 2.0);
  EXPECT_EQ(bucket("0.5"), 3.0);
  EXPECT_EQ(bucket("1"), 5.0);
  EXPECT_EQ(bucket("+Inf"), 7.0);
  EXPECT_EQ(exp.Find("latency_seconds_bucket").size(), 4u);
  EXPECT_EQ(exp.Value("latency_seconds_count", {{"route", "/v1"}}), 7.0);
  EXPECT_NEAR(*exp.Value("latency_seconds_sum", {{"route", "/v1"}}), 107.05, 1e-9);
}

TEST(HistogramTest, BucketsAreMonotonicAndEndAtCount) {
  Registry registry;
  Histogram* h = registry.AddHistogram("tokens", "Tokens.", LinearBuckets(10, 10, 9))
                     .value()
                     ->WithLabels({})
                     .value();
  for (int i = 0; i < 1000; ++i) h->Observe((i * 37) % 120);
  auto exp = ParseExposition(registry.RenderText());
  auto buckets = exp.Find("tokens_bucket");
  ASSERT_EQ(buckets.size(), 10u);
  for (size_t i = 1; i < buckets.size(); ++i) EXPECT_GE(buckets[i].value, buckets[i - 1].value);
  EXPECT_EQ(buckets.back().labels["le"], "+Inf");
  EXPECT_EQ(buckets.back().value, 1000.0);
  EXPECT_EQ(exp.Value("tokens_count"), 1000.0);
}

TEST(HistogramTest, NoBoundsMeansOnlyInf) {
  Registry registry;
  Histogram* h = registry.AddHistogram("h", "H.", {}).value()->WithLabels({}).value();
  h->Observe(-3);
  auto exp = ParseExposition(registry.RenderText());
  EXPECT_EQ(exp.Find("h_bucket").size(), 1u);
  EXPECT_EQ(exp.Value("h_bucket", {{"le", "+Inf"}}), 1.0);
  EXPECT_EQ(exp.Value("h_sum"), -3.0);
}

TEST(HistogramTest, NanIsDroppedAndInfinityLandsInInfBucket) {
  Histogram h({1.0});
  h.Observe(NAN);
  h.Observe(INFINITY);
  h.Observe(-INFINITY);
  Histogram::Snapshot snap = h.Snap();
  EXPECT_EQ(snap.count, 2u);
  EXPECT_EQ(snap.cumulative_counts, (std::vector<uint64_t>{1, 2}));
}

TEST(HistogramTest, BadBoundsAreRejected) {
  Registry registry;
  EXPECT_EQ(registry.AddHistogram("a", "x", {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("b", "x", {2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("c", "x", {1, INFINITY}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("d", "x", {NAN}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HistogramTest, BucketHelpers) {
  EXPECT_EQ(LinearBuckets(1, 2, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(ExponentialBuckets(1, 4, 3), (std::vector<double>{1, 4, 16}));
}

}  // namespace
}  // namespace tandem::metrics
