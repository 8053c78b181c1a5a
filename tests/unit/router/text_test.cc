#include <string>
#include <vector>

#include "api/generation/stop_matcher.h"
#include "api/generation/text_stream.h"
#include "fake_worker.h"
#include "gtest/gtest.h"

namespace tandem::router {
namespace {

std::string PushAll(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.Push(p);
  return out;
}

TEST(StopMatcherTest, HoldsBackAPossibleStartAndReleasesItWhenItDiverges) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("abc ST"), "abc ");
  EXPECT_EQ(m.Push("O"), "");
  EXPECT_EQ(m.Push("x"), "STOx");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("S"), "");
  EXPECT_EQ(m.Flush(), "S");
}

TEST(StopMatcherTest, CutsBeforeTheEarliestMatchAcrossPieces) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(PushAll(m, {"hel", "lo", " wor", "ld!"}), "hel");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, EmptyStopListPassesEverythingThrough) {
  StopMatcher m({""});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(TextStreamTest, StopTokenEndsTheOutputAndIsNotPartOfIt) {
  testing::ByteTokenizer tok;
  TextStream s(tok, 1, {1}, {});
  std::string out;
  for (std::int32_t id : testing::Ids("hi")) out += s.Push(id).value();
  out += s.Push(1).value();
  EXPECT_TRUE(s.stopped());
  out += s.Push(testing::Ids("x")[0]).value();
  out += s.Finish();
  EXPECT_EQ(out, "hi");
  EXPECT_EQ(s.token_ids(), testing::Ids("hi"));
}

TEST(TextStreamTest, AnUnfinishedCharacterAtTheEndBecomesAReplacement) {
  testing::ByteTokenizer tok;
  TextStream s(tok, 1, {}, {});
  EXPECT_EQ(s.Push(0xC3 + 3).value(), "");
  EXPECT_EQ(s.Finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tandem::router
