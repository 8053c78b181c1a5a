#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/config/flags.h"
#include "tandem/kernels/backend.h"

namespace tandem::generate {

struct GenerateOptions {
  std::string model;  // directory (model.bin or config.json) or a llama2.c .bin file
  std::string prompt;
  int max_tokens = 256;
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;
  std::int64_t seed = -1;  // < 0: derived from the request id
  int threads = 0;         // 0: hardware concurrency
  kernels::CpuIsa cpu_isa = kernels::CpuIsa::kAuto;
  // nullopt: auto, resolved against the checkpoint's dtype when the backend is made
  // (kernels::AutoBf16MatMul).
  std::optional<kernels::Bf16MatMul> bf16_matmul;
  bool print_ids = false;
  int kv_cache_mb = 256;
};

// Outcome of parsing: either options to run with, or text to print (--help) and exit 0.
struct ParsedCommandLine {
  GenerateOptions options;
  bool help = false;
  std::string help_text;
};

// Flags, then environment fallbacks (TANDEM_MODEL, ...), then defaults. InvalidArgument names the
// offending flag; the caller exits with status 2.
absl::StatusOr<ParsedCommandLine> ParseCommandLine(int argc, const char* const* argv,
                                                   const config::EnvLookup& env);

}  // namespace tandem::generate
