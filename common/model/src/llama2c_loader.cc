#include "absl/status/status.h"
#include "loader_internal.h"

namespace tandem::model::internal {
absl::StatusOr<std::unique_ptr<Model>> LoadLlama2c(const std::string&, const LoadOptions&,
                                                   kernels::Backend*) {
  return absl::UnimplementedError("llama2.c loader not built yet");
}
}  // namespace tandem::model::internal
