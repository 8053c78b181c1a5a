#include "trace.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Trace Read(const std::string& text, int block_size = 4) {
  std::istringstream in(text);
  return ReadTrace(in, block_size);
}

TEST(TraceTest, SkipsMalformedLinesNamingThem) {
  const Trace trace = Read(
      R"({"timestamp": 500, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]})"
      "\n"
      "not json\n"
      "[1, 2]\n"
      R"({"timestamp": 1, "input_length": 8, "output_length": 2})"
      "\n"
      R"({"timestamp": 1, "input_length": -5, "output_length": 2, "hash_ids": [1]})"
      "\n"
      R"({"timestamp": 1, "input_length": 9, "output_length": 2, "hash_ids": [1, 2]})"
      "\n"
      "   \n"
      R"({"timestamp": 1, "input_length": 4, "output_length": 2, "hash_ids": ["x"]})"
      "\n"
      R"({"timestamp": 100, "input_length": 5, "output_length": 0, "hash_ids": [3, 4]})"
      "\n"
      R"({"timestamp": -1, "input_length": 4, "output_length": 0, "hash_ids": [3]})"
      "\n"
      R"({"timestamp": 1, "input_length": 4, "output_length": 99999999999, "hash_ids": [3]})"
      "\n");
  ASSERT_EQ(trace.requests.size(), 2u);
  // Sorted by arrival: line 9 (100 ms) before line 1 (500 ms).
  EXPECT_EQ(trace.requests[0].line, 9);
  EXPECT_DOUBLE_EQ(trace.requests[0].arrival_seconds, 0.1);
  EXPECT_EQ(trace.requests[0].input_length, 5);
  EXPECT_EQ(trace.requests[0].output_length, 0);
  EXPECT_EQ(trace.requests[1].line, 1);
  ASSERT_EQ(trace.skipped.size(), 8u);
  EXPECT_THAT(trace.skipped[0], HasSubstr("line 2: not valid JSON"));
  EXPECT_THAT(trace.skipped[1], HasSubstr("line 3: not a JSON object"));
  EXPECT_THAT(trace.skipped[2], HasSubstr("line 4: missing 'hash_ids'"));
  EXPECT_THAT(trace.skipped[3], HasSubstr("line 5: 'input_length'"));
  EXPECT_THAT(trace.skipped[4], HasSubstr("line 6: 'hash_ids' has 2 ids but 9 tokens need 3"));
  EXPECT_THAT(trace.skipped[5], HasSubstr("line 8: 'hash_ids' must hold"));
  EXPECT_THAT(trace.skipped[6], HasSubstr("line 10: 'timestamp'"));
  EXPECT_THAT(trace.skipped[7], HasSubstr("line 11: 'input_length' and 'output_length' must be"));
}

TEST(TraceTest, HashesAreChainedSoOnlySharedPrefixesMatch) {
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 3]})"
      "\n"
      R"({"timestamp": 1, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 4]})"
      "\n"
      R"({"timestamp": 2, "input_length": 8, "output_length": 1, "hash_ids": [7, 2]})"
      "\n");
  ASSERT_EQ(trace.requests.size(), 3u);
  const auto& a = trace.requests[0].chain;
  const auto& b = trace.requests[1].chain;
  const auto& c = trace.requests[2].chain;
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
  // Block id 2 after another prefix is another block.
  EXPECT_NE(c[1], a[1]);
}

TEST(TraceTest, InfiniteCacheBoundCountsLeadingRunsOfSeenBlocks) {
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n"
      R"({"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1, 2, 3]})"
      "\n"
      R"({"timestamp": 2, "input_length": 4, "output_length": 1, "hash_ids": [3]})"
      "\n"
      R"({"timestamp": 3, "input_length": 6, "output_length": 1, "hash_ids": [1, 2]})"
      "\n");
  // Hits: 0, 8 of 10, 0 ([3] alone is not the third block of [1, 2, 3]), 6 of 6 (partial block).
  EXPECT_DOUBLE_EQ(InfiniteCacheHitRate(trace, 4), 14.0 / 28.0);
}

TEST(TraceTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadTraceFile("/nonexistent/trace.jsonl", 512).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::sim
