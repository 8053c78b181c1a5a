#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"
#include "tandem/engine/engine.h"
#include "tandem/engine/sampling.h"
#include "tandem/v1/common.pb.h"

namespace tandem::rpc {

inline constexpr std::uint32_t kApiMajor = 1;
inline constexpr std::uint32_t kApiMinor = 0;

// Trailing metadata key a worker sets when it refuses new work because it is draining: the router
// places the request on another worker and stops choosing this one (without waiting for the
// worker's draining heartbeat), instead of treating the worker as lost.
inline constexpr char kDrainingTrailer[] = "tandem-worker-draining";
// On a FAILED_PRECONDITION from Prefill or Generate: the prompt has images whose rows were not
// sent (the router expected the worker's prefix cache to cover them) and the worker has to
// compute them; sending the request again with every image encoded succeeds.
inline constexpr char kImageRowsNeededTrailer[] = "tandem-image-rows-needed";

v1::ApiVersion CurrentVersion();
// FailedPrecondition when the peer speaks another major version; newer minors are accepted
// (their additions are unknown fields to us).
absl::Status CheckVersion(const v1::ApiVersion& peer);

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

v1::SamplingParams ToProto(const engine::SamplingParams& params);
// Range checks happen in the engine (ValidateSamplingParams); this only maps fields.
engine::SamplingParams FromProto(const v1::SamplingParams& params);

v1::FinishReason ToProto(engine::FinishReason reason);
engine::FinishReason FromProto(v1::FinishReason reason);

}  // namespace tandem::rpc
