#pragma once

// Starting tandem binaries as child processes for multi-process tests: each writes its ports to
// a file once it listens, and its output to a log kept in the test's directory.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "child_process.h"
#include "gtest/gtest.h"

namespace tandem::testing {

struct Proc {
  ChildProcess process;
  std::vector<int> ports;  // the binary's --port-file: (HTTP or gRPC, metrics or control)
};

// Starts `binary --model model --port-file DIR/NAME.port extra...` and waits for its ports.
// Fails the test (fatally, in the caller's ASSERT_NO_FATAL_FAILURE) when it does not come up.
inline void StartProc(Proc* p, const std::filesystem::path& dir, const std::string& binary,
                      const std::string& name, const std::filesystem::path& model,
                      const std::vector<std::string>& extra) {
  const std::filesystem::path port_file = dir / (name + ".port");
  std::filesystem::remove(port_file);
  std::vector<std::string> args = {binary, "--model", model.string(), "--port-file",
                                   port_file.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  ASSERT_TRUE(p->process.Start(args, (dir / (name + ".log")).string()));
  p->ports = WaitForPorts(port_file, std::chrono::milliseconds(30000));
  ASSERT_EQ(p->ports.size(), 2u) << name << " did not start:\n" << p->process.log();
}

}  // namespace tandem::testing
