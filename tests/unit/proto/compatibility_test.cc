// The v1 contract: peers of different minor versions interoperate. These tests pin the two
// properties that make that true for the messages we ship.
#include "gtest/gtest.h"
#include "tandem/v1/common.pb.h"
#include "tandem/v1/router_control.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem {
namespace {

TEST(ProtoCompatibility, OlderPeerKeepsFieldsItDoesNotKnow) {
  // A newer peer's HeartbeatRequest with a field number this build does not define.
  v1::HeartbeatRequest newer;
  newer.set_worker_id("decode-0");
  newer.set_incarnation(7);
  std::string wire = newer.SerializeAsString();
  // Append field 99 (varint, value 42) as a future minor version would.
  constexpr unsigned kTag = 99u << 3;  // wire type 0 (varint)
  wire.push_back(static_cast<char>((kTag & 0x7fu) | 0x80u));
  wire.push_back(static_cast<char>(kTag >> 7));
  wire.push_back(42);

  v1::HeartbeatRequest older;
  ASSERT_TRUE(older.ParseFromString(wire));
  EXPECT_EQ(older.worker_id(), "decode-0");
  EXPECT_EQ(older.incarnation(), 7u);
  // Re-serialising keeps the unknown field, so a proxy in the middle does not drop it.
  EXPECT_EQ(older.SerializeAsString(), wire);
}

TEST(ProtoCompatibility, SeedPresenceIsDistinguishableFromZero) {
  v1::SamplingParams params;
  EXPECT_FALSE(params.has_seed());
  params.set_seed(0);
  EXPECT_TRUE(params.has_seed());
  v1::SamplingParams round_trip;
  ASSERT_TRUE(round_trip.ParseFromString(params.SerializeAsString()));
  EXPECT_TRUE(round_trip.has_seed());
  EXPECT_EQ(round_trip.seed(), 0u);
}

TEST(ProtoCompatibility, GenerateStreamMessageRoundTrips) {
  v1::GenerateResponse last;
  last.add_token_ids(5);
  last.set_finish_reason(v1::FINISH_REASON_LENGTH);
  last.mutable_usage()->set_prompt_tokens(3);
  last.mutable_usage()->set_completion_tokens(1);
  v1::GenerateResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(last.SerializeAsString()));
  EXPECT_EQ(parsed.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(parsed.usage().prompt_tokens(), 3u);
  ASSERT_EQ(parsed.token_ids_size(), 1);
  EXPECT_EQ(parsed.token_ids(0), 5);
}

}  // namespace
}  // namespace tandem
