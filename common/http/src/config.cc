#include "tandem/http/config.h"

#include "absl/strings/str_cat.h"

namespace tandem::http {
namespace {

absl::Status RequirePositive(absl::string_view field, absl::Duration value) {
  if (value <= absl::ZeroDuration() || value == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerConfig.", field, " must be positive and finite, got ",
                     absl::FormatDuration(value)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ServerConfig::Validate() const {
  if (host.empty()) return absl::InvalidArgumentError("ServerConfig.host is empty");
  if (io_threads < 1 || io_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerConfig.io_threads must be in [1, 256], got ", io_threads));
  }
  if (max_header_bytes < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerConfig.max_header_bytes must be >= 256, got ", max_header_bytes));
  }
  if (max_connections < 1) {
    return absl::InvalidArgumentError("ServerConfig.max_connections must be >= 1");
  }
  if (sse_queue_events < 1) {
    return absl::InvalidArgumentError("ServerConfig.sse_queue_events must be >= 1");
  }
  for (const auto& [field, value] :
       {std::pair<absl::string_view, absl::Duration>{"header_timeout", header_timeout},
        {"body_timeout", body_timeout},
        {"idle_timeout", idle_timeout},
        {"write_timeout", write_timeout}}) {
    if (absl::Status status = RequirePositive(field, value); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace tandem::http
