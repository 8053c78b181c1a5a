#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tandem/routing/policy.h"

namespace tandem::routing {

std::vector<std::string> PolicyNames() {
  return {"round-robin", "least-load", "power-of-two", "sglang-cache-aware", "dynamo-cost", "tandem"};
}

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(absl::string_view name) {
  if (name == "round-robin") return MakeRoundRobinPolicy();
  if (name == "least-load") return MakeLeastLoadPolicy();
  if (name == "power-of-two") return MakePowerOfTwoPolicy();
  if (name == "sglang-cache-aware") return MakeCacheAwarePolicy();
  if (name == "dynamo-cost") return MakeDynamoCostPolicy();
  if (name == "tandem") return MakeTandemPolicy();
  return absl::InvalidArgumentError(absl::StrCat("unknown routing policy '", name,
                                                 "'; known: ", absl::StrJoin(PolicyNames(), ", ")));
}

}  // namespace tandem::routing
