#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/optional.h"

namespace tandem::config {

// Looks up an environment variable. Injected so that tests never read the process environment.
using EnvLookup = std::function<absl::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();  // getenv

// Typed command-line flags bound to fields of a config struct. Precedence: an explicit
// --flag beats its environment variable, which beats the field's initial value (the default).
//
//   WorkerConfig cfg;
//   FlagSet flags("tandem-worker", "Runs prefill and decode in one process.");
//   flags.String("model", &cfg.model_dir, "checkpoint directory", "TANDEM_MODEL");
//   flags.Int("port", &cfg.port, "gRPC port (0: ephemeral)", "TANDEM_PORT");
//   if (auto st = flags.Parse(argc, argv, ProcessEnv()); !st.ok()) { ...exit 2... }
//
// Accepted forms: --name=value, --name value, --bool-flag, --no-bool-flag. Unknown flags,
// missing values and values that do not parse are errors naming the flag (or variable).
class FlagSet {
 public:
  FlagSet(std::string program, std::string summary);

  void String(const std::string& name, std::string* target, const std::string& help,
              const std::string& env = "");
  void Int(const std::string& name, int* target, const std::string& help,
           const std::string& env = "");
  void Int64(const std::string& name, std::int64_t* target, const std::string& help,
             const std::string& env = "");
  void Double(const std::string& name, double* target, const std::string& help,
              const std::string& env = "");
  void Bool(const std::string& name, bool* target, const std::string& help,
            const std::string& env = "");

  absl::Status Parse(int argc, const char* const* argv, const EnvLookup& env);
  bool help_requested() const { return help_requested_; }
  bool version_requested() const { return version_requested_; }
  std::string Help() const;
  const std::string& program() const { return program_; }
  // Positional arguments left after the flags.
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  enum class Kind { kString, kInt, kInt64, kDouble, kBool };
  struct Flag {
    std::string name;
    Kind kind;
    void* target;
    std::string help;
    std::string env;
    std::string default_text;
  };
  void Add(const std::string& name, Kind kind, void* target, const std::string& help,
           const std::string& env);
  static absl::Status Assign(const Flag& flag, const std::string& value, const std::string& source);
  const Flag* Find(const std::string& name) const;

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
  bool version_requested_ = false;
};

}  // namespace tandem::config
