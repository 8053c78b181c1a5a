#include "tandem/config/service_main.h"

#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tandem/config/build_info.h"

namespace tandem::config {

absl::optional<int> ParseServiceFlags(FlagSet& flags, int argc, const char* const* argv,
                                      const EnvLookup& env) {
  if (absl::Status st = flags.Parse(argc, argv, env); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (flags.version_requested()) {
    std::cout << VersionLine(flags.program()) << "\n";
    return 0;
  }
  return absl::nullopt;
}

absl::StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& value) {
  const size_t colon = value.rfind(':');
  HostPort out;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &out.port) || out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be host:port with a port in [0, 65535], got '", value, "'"));
  }
  out.host = value.substr(0, colon);
  // [::1]:8000 style literals: the brackets belong to the URL form, not to the address.
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

absl::Status WritePortFile(const std::string& path, const std::vector<int>& ports) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << absl::StrJoin(ports, " ") << "\n";
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

absl::optional<int> StopSignals::WaitFor(std::chrono::milliseconds timeout) {
  const auto ms = std::max<std::int64_t>(0, timeout.count());
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  const int sig = sigtimedwait(&set_, nullptr, &ts);
  if (sig < 0) return absl::nullopt;  // EAGAIN (timeout) or EINTR
  return sig;
}

int StopSignals::Wait() {
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

}  // namespace tandem::config
