#pragma once

// Runs a program with explicit argv and environment (no shell, so prompts need no quoting) and
// captures its exit code, stdout and stderr.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::testing {

struct ProcessResult {
  int exit_code = -1;  // -1: did not start or did not exit normally
  std::string out;
  std::string err;
};

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline ProcessResult RunProcess(const std::vector<std::string>& args,
                                const std::vector<std::string>& env = {}) {
  namespace fs = std::filesystem;
  char dir_template[] = "/tmp/tandem_subprocess_XXXXXX";
  ProcessResult result;
  if (mkdtemp(dir_template) == nullptr) return result;
  const fs::path dir(dir_template);
  const std::string out_path = (dir / "stdout").string(), err_path = (dir / "stderr").string();

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

}  // namespace tandem::testing
