#include "tandem/rpc/conversions.h"

#include "gtest/gtest.h"

namespace tandem::rpc {
namespace {

TEST(Conversions, SamplingParamsRoundTripIncludingSeedPresence) {
  engine::SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repetition_penalty = 1.1f;
  p.stop_token_ids = {2, 7};
  p.ignore_eos = true;
  p.max_tokens = 33;
  p.seed = 0;  // zero is a real seed, not "absent"
  const engine::SamplingParams back = FromProto(ToProto(p));
  EXPECT_EQ(back.temperature, p.temperature);
  EXPECT_EQ(back.top_k, p.top_k);
  EXPECT_EQ(back.top_p, p.top_p);
  EXPECT_EQ(back.min_p, p.min_p);
  EXPECT_EQ(back.presence_penalty, p.presence_penalty);
  EXPECT_EQ(back.frequency_penalty, p.frequency_penalty);
  EXPECT_EQ(back.repetition_penalty, p.repetition_penalty);
  EXPECT_EQ(back.stop_token_ids, p.stop_token_ids);
  EXPECT_EQ(back.ignore_eos, p.ignore_eos);
  EXPECT_EQ(back.max_tokens, p.max_tokens);
  ASSERT_TRUE(back.seed.has_value());
  EXPECT_EQ(*back.seed, 0u);
}

TEST(Conversions, UnsetProtoFieldsMeanNeutralSampling) {
  const engine::SamplingParams p = FromProto(v1::SamplingParams());
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_FALSE(p.seed.has_value());
}

TEST(Conversions, StatusCodesSurviveTheWire) {
  const absl::Status st = absl::ResourceExhaustedError("queue full");
  const grpc::Status g = ToGrpc(st);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(FromGrpc(g), st);
  EXPECT_TRUE(FromGrpc(ToGrpc(absl::OkStatus())).ok());
}

TEST(Conversions, VersionCheckRejectsOtherMajors) {
  v1::ApiVersion v;
  EXPECT_TRUE(CheckVersion(v).ok());  // unset: a v1 peer from before versioning
  v.set_major(1);
  v.set_minor(99);
  EXPECT_TRUE(CheckVersion(v).ok());
  v.set_major(2);
  EXPECT_EQ(CheckVersion(v).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Conversions, FinishReasonsMapBothWays) {
  for (auto r : {engine::FinishReason::kStop, engine::FinishReason::kLength,
                 engine::FinishReason::kCancelled, engine::FinishReason::kError}) {
    EXPECT_EQ(FromProto(ToProto(r)), r);
  }
}

}  // namespace
}  // namespace tandem::rpc
