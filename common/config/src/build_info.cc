#include "tandem/config/build_info.h"

#include "absl/strings/str_cat.h"

// Defined only for this file (common/config/CMakeLists.txt), so a new commit recompiles one
// file instead of every object that includes a config header.
#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif
#ifndef TANDEM_GIT_COMMIT
#define TANDEM_GIT_COMMIT "unknown"
#endif
#ifndef TANDEM_BUILD_TYPE
#define TANDEM_BUILD_TYPE "unknown"
#endif

namespace tandem::config {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info{TANDEM_VERSION, TANDEM_GIT_COMMIT, TANDEM_BUILD_TYPE};
  return info;
}

std::string VersionLine(const std::string& program) {
  const BuildInfo& b = GetBuildInfo();
  return absl::StrCat(program, " ", b.version, " (commit ", b.git_commit, ", ", b.build_type,
                      ")");
}

}  // namespace tandem::config
