#pragma once

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "tandem/config/flags.h"

namespace tandem::config {

// What every server binary's main does with its flags: parse (flags > environment > defaults),
// print --help, report errors. Returns the exit code when the program should stop now (0 after
// --help, 2 for bad flags, with the message on stderr), nullopt to go on.
absl::optional<int> ParseServiceFlags(FlagSet& flags, int argc, const char* const* argv,
                                      const EnvLookup& env);

struct HostPort {
  std::string host;
  int port = 0;
};
// "host:port" (also "[::1]:port") -> (host, port); port 0 is allowed (ephemeral). The error names
// the flag the value came from.
absl::StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& value);

// Writes "P1 P2 ...\n" atomically (temp file + rename), so a script polling for it never reads a
// partial line. How tests and deploy scripts learn ephemeral ports.
absl::Status WritePortFile(const std::string& path, const std::vector<int>& ports);

// SIGINT/SIGTERM taken synchronously by the thread that calls Wait(). Construct it before starting
// any thread: threads inherit the blocked mask, so the signals reach only Wait().
class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT or SIGTERM arrives; returns its number.
  int Wait();
  // As Wait, for at most `timeout`: nullopt when none arrived (how a drain polls for its end and
  // still hears a second signal).
  absl::optional<int> WaitFor(std::chrono::milliseconds timeout);

 private:
  sigset_t set_;
};

}  // namespace tandem::config
