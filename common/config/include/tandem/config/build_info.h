#pragma once

#include <string>

namespace tandem::config {

// What this binary was built from, for `--version` and the `tandem_build_info` metric. Set when
// CMake configures (TANDEM_VERSION, TANDEM_GIT_COMMIT; an image build with no .git passes the
// commit as a cache variable), so a rebuild without reconfiguring keeps the old commit.
struct BuildInfo {
  std::string version;     // the release version, e.g. "0.1.0"
  std::string git_commit;  // short commit hash, "unknown" outside a git checkout
  std::string build_type;  // CMAKE_BUILD_TYPE
};
const BuildInfo& GetBuildInfo();

// "<program> <version> (commit <hash>, <build type>)", the line `--version` prints.
std::string VersionLine(const std::string& program);

}  // namespace tandem::config
