#include "tandem/rpc/conversions.h"

#include "absl/strings/str_cat.h"

namespace tandem::rpc {

v1::ApiVersion CurrentVersion() {
  v1::ApiVersion v;
  v.set_major(kApiMajor);
  v.set_minor(kApiMinor);
  return v;
}

absl::Status CheckVersion(const v1::ApiVersion& peer) {
  // An unset version (major 0) is a peer from before versioning existed, which is v1.
  if (peer.major() != 0 && peer.major() != kApiMajor) {
    return absl::FailedPreconditionError(absl::StrCat("peer speaks tandem API v", peer.major(),
                                                      ", this build speaks v", kApiMajor));
  }
  return absl::OkStatus();
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

v1::SamplingParams ToProto(const engine::SamplingParams& p) {
  v1::SamplingParams out;
  out.set_temperature(p.temperature);
  out.set_top_k(p.top_k);
  out.set_top_p(p.top_p);
  out.set_min_p(p.min_p);
  out.set_presence_penalty(p.presence_penalty);
  out.set_frequency_penalty(p.frequency_penalty);
  out.set_repetition_penalty(p.repetition_penalty);
  for (std::int32_t id : p.stop_token_ids) out.add_stop_token_ids(id);
  out.set_ignore_eos(p.ignore_eos);
  out.set_max_tokens(p.max_tokens);
  if (p.seed.has_value()) out.set_seed(*p.seed);
  out.set_kv_hash_root(p.kv_hash_root);
  return out;
}

engine::SamplingParams FromProto(const v1::SamplingParams& p) {
  engine::SamplingParams out;
  out.temperature = p.temperature();
  out.top_k = p.top_k();
  // proto3 zero means "unset" for these; their neutral values are not zero.
  out.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  out.min_p = p.min_p();
  out.presence_penalty = p.presence_penalty();
  out.frequency_penalty = p.frequency_penalty();
  out.repetition_penalty = p.repetition_penalty() == 0.0f ? 1.0f : p.repetition_penalty();
  out.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  out.ignore_eos = p.ignore_eos();
  out.max_tokens = p.max_tokens();
  if (p.has_seed()) out.seed = p.seed();
  out.kv_hash_root = p.kv_hash_root();
  return out;
}

v1::FinishReason ToProto(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case engine::FinishReason::kError: return v1::FINISH_REASON_ERROR;
    case engine::FinishReason::kNone: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

engine::FinishReason FromProto(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP: return engine::FinishReason::kStop;
    case v1::FINISH_REASON_LENGTH: return engine::FinishReason::kLength;
    case v1::FINISH_REASON_CANCELLED: return engine::FinishReason::kCancelled;
    case v1::FINISH_REASON_ERROR: return engine::FinishReason::kError;
    default: break;
  }
  return engine::FinishReason::kNone;
}

}  // namespace tandem::rpc
