#include <string>
#include <thread>
#include <vector>

#include "exposition_parser.h"
#include "gtest/gtest.h"
#include "tandem/metrics/registry.h"

namespace tandem::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kPerThread = 20000;

TEST(ConcurrencyTest, IncrementsFromManyThreadsSumExactly) {
  Registry registry;
  auto* counters = registry.AddCounter("ops_total", "Ops.", {"worker_group"}).value();
  Gauge* gauge = registry.AddGauge("inflight", "In flight.").value()->WithLabels({}).value();
  Histogram* hist =
      registry.AddHistogram("size", "Size.", {1, 2, 3}).value()->WithLabels({}).value();

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Children are looked up concurrently too: every thread must get the same child.
      Counter* shared = counters->WithLabels({"all"}).value();
      Counter* mine = counters->WithLabels({t % 2 ? "odd" : "even"}).value();
      for (int i = 0; i < kPerThread; ++i) {
        shared->Increment();
        mine->Increment(2);
        gauge->Increment();
        gauge->Decrement();
        gauge->Add(0.5);
        hist->Observe(i % 4);  // 0,1,2,3: one in each bucket and one past the last bound.
      }
    });
  }
  // A scrape racing the writers must still parse and stay self-consistent.
  for (int i = 0; i < 20; ++i) {
    auto exp = testing::ParseExposition(registry.RenderText());
    ASSERT_TRUE(exp.errors.empty());
    EXPECT_EQ(exp.Value("size_bucket", {{"le", "+Inf"}}), exp.Value("size_count"));
  }
  for (auto& thread : threads) thread.join();

  auto exp = testing::ParseExposition(registry.RenderText());
  const double total = double{kThreads} * kPerThread;
  EXPECT_EQ(exp.Value("ops_total", {{"worker_group", "all"}}), total);
  EXPECT_EQ(exp.Value("ops_total", {{"worker_group", "odd"}}), total);  // half the threads x2
  EXPECT_EQ(exp.Value("ops_total", {{"worker_group", "even"}}), total);
  EXPECT_EQ(exp.Value("inflight"), total * 0.5);
  EXPECT_EQ(exp.Value("size_bucket", {{"le", "1"}}), total / 2);
  EXPECT_EQ(exp.Value("size_bucket", {{"le", "3"}}), total);
  EXPECT_EQ(exp.Value("size_count"), total);
  EXPECT_EQ(exp.Value("size_sum"), total / 4 * (0 + 1 + 2 + 3));
}

TEST(ConcurrencyTest, ScrapesRacingChildRemovalStayWellFormed) {
  // Workers coming and going: each thread adds and removes its own series (it never touches a
  // pointer after removing it) while scrapes run.
  Registry registry;
  auto* up = registry.AddGauge("up", "Up.", {"worker"}).value();
  auto* lat = registry.AddHistogram("lat", "Latency.", {1, 2}, {"worker"}).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string worker = "w" + std::to_string(t);
      for (int i = 0; i < 2000; ++i) {
        up->WithLabels({worker}).value()->Set(1);
        lat->WithLabels({worker}).value()->Observe(i % 3);
        if (i % 2 == 0) {
          up->Remove({worker});
        } else {
          lat->RemoveMatching("worker", worker);
        }
      }
      up->Remove({worker});
      lat->Remove({worker});
    });
  }
  for (int i = 0; i < 50; ++i) {
    auto exp = testing::ParseExposition(registry.RenderText());
    ASSERT_TRUE(exp.errors.empty());
    for (const auto& count : exp.Find("lat_count")) {
      EXPECT_EQ(exp.Value("lat_bucket", {{"worker", count.labels.at("worker")}, {"le", "+Inf"}}),
                count.value);
    }
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(up->size(), 0u);
  EXPECT_EQ(lat->size(), 0u);
  auto exp = testing::ParseExposition(registry.RenderText());
  EXPECT_TRUE(exp.Find("up").empty());
  EXPECT_TRUE(exp.Find("lat_count").empty());
}

}  // namespace
}  // namespace tandem::metrics
