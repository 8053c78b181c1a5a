#include "tandem/routing/recent_quantile.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

TEST(RecentQuantileTest, NothingHeldReadsInfinite) {
  RecentQuantile q(4);
  EXPECT_EQ(q.Quantile(0.9), std::numeric_limits<double>::infinity());
  q.Add(std::nan(""));
  q.Add(std::numeric_limits<double>::infinity());
  EXPECT_EQ(q.size(), 0u);
}

TEST(RecentQuantileTest, ReadsTheRankWithTheShareAtOrUnderIt) {
  RecentQuantile q(10);
  for (int v : {7, 3, 9, 1, 5, 2, 8, 10, 4, 6}) q.Add(v);  // 1..10 in no order
  EXPECT_EQ(q.Quantile(0.9), 9);                           // 9 of 10 at or under 9
  EXPECT_EQ(q.Quantile(0.91), 10);
  EXPECT_EQ(q.Quantile(0.5), 5);
  EXPECT_EQ(q.Quantile(0), 1);
  EXPECT_EQ(q.Quantile(1), 10);
  EXPECT_EQ(q.Quantile(2), 10);  // clamped
}

TEST(RecentQuantileTest, OnlyTheLastWindowCounts) {
  RecentQuantile q(4);
  for (int v : {100, 200, 300, 400}) q.Add(v);
  EXPECT_EQ(q.Quantile(1), 400);
  // Each new value pushes out the oldest: after four small ones the large ones are gone.
  q.Add(1);
  EXPECT_EQ(q.Quantile(0), 1);
  EXPECT_EQ(q.Quantile(1), 400);
  q.Add(2);
  q.Add(3);
  q.Add(4);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.Quantile(1), 4);
  EXPECT_EQ(q.Quantile(0.5), 2);
}

TEST(RecentQuantileTest, EqualValuesLeaveOneCopyEach) {
  RecentQuantile q(3);
  q.Add(5);
  q.Add(5);
  q.Add(1);
  q.Add(9);  // drops one 5
  EXPECT_EQ(q.Quantile(0), 1);
  EXPECT_EQ(q.Quantile(0.5), 5);
  EXPECT_EQ(q.Quantile(1), 9);
  q.Add(9);  // drops the other 5
  EXPECT_EQ(q.Quantile(0.5), 9);
}

}  // namespace
}  // namespace tandem::routing
