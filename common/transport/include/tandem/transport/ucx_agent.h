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
  // "LO-HI": the TCP ports UCX listens on for peers, so that a network policy can open exactly
  // these to the workers that may write KV (UCX itself accepts any peer that connects). Empty:
  // any free port (UCX's default, or the UCX_TCP_PORT_RANGE environment variable).
  std::string tcp_port_range;
};

// Checks a "LO-HI" port range (1 <= LO <= HI <= 65535); empty is valid (no restriction).
absl::Status ValidatePortRange(const std::string& range);

// A TransferAgent on UCX one-sided RMA (ucp_put_nbx into rkeys of the receiver's registrations).
absl::StatusOr<std::unique_ptr<TransferAgent>> CreateUcxAgent(const UcxAgentOptions& options);

}  // namespace tandem::transport
