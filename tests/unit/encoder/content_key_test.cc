#include "content_key.h"

#include <set>

#include "gtest/gtest.h"

namespace tandem::encoder {
namespace {

TEST(ContentKeyTest, EveryInputChangesTheKeyAndFieldsCannotBleedIntoEachOther) {
  const EncodingIdentity base{"weights-a", "pre-1"};
  std::set<std::string> keys = {
      ContentKey(base, "high", "bytes"),
      ContentKey({"weights-b", "pre-1"}, "high", "bytes"),
      ContentKey({"weights-a", "pre-2"}, "high", "bytes"),
      ContentKey(base, "low", "bytes"),
      ContentKey(base, "high", "bytez"),
      // Shifting bytes between adjacent fields must not give the same hashed stream.
      ContentKey({"weights-a", "pre-1h"}, "igh", "bytes"),
      ContentKey(base, "highb", "ytes"),
  };
  EXPECT_EQ(keys.size(), 7u);
  EXPECT_EQ(ContentKey(base, "high", "bytes"), ContentKey(base, "high", "bytes"));
  EXPECT_EQ(ContentKey(base, "high", "bytes").size(), 64u);
}

}  // namespace
}  // namespace tandem::encoder
