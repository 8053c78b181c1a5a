#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/transport/transfer_agent.h"

namespace tandem::transport {

struct UcxAgentOptions {
  // UCX transport list (UCX_TLS syntax), e.g. "tcp", "sm,self", "rc,sm". Empty: UCX's default
  // (which honours the UCX_TLS environment variable).
  std::string transports;
};

// A TransferAgent on UCX one-sided RMA (ucp_put_nbx into rkeys of the receiver's registrations).
absl::StatusOr<std::unique_ptr<TransferAgent>> CreateUcxAgent(const UcxAgentOptions& options);

}  // namespace tandem::transport
