#include "generate_options.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::generate {

absl::StatusOr<ParsedCommandLine> ParseCommandLine(int argc, const char* const* argv,
                                                   const config::EnvLookup& env) {
  ParsedCommandLine parsed;
  GenerateOptions& o = parsed.options;
  config::FlagSet flags(
      "tandem-generate",
      "Generates a continuation of --prompt offline and prints prompt + continuation, as\n"
      "llama2.c's run does. llama2.c checkpoints stop when the model emits BOS (id 1).");
  flags.String("model", &o.model, "model directory (model.bin + tokenizer.bin) or .bin file",
               "TANDEM_MODEL");
  flags.String("prompt", &o.prompt, "text to continue (BOS is prepended)", "TANDEM_PROMPT");
  flags.Int("max-tokens", &o.max_tokens, "tokens to generate at most", "TANDEM_MAX_TOKENS");
  flags.Double("temperature", &o.temperature, "0 is greedy", "TANDEM_TEMPERATURE");
  flags.Double("top-p", &o.top_p, "nucleus sampling mass (1 disables)", "TANDEM_TOP_P");
  flags.Int("top-k", &o.top_k, "keep the k most likely tokens (0 disables)", "TANDEM_TOP_K");
  flags.Int64("seed", &o.seed,
              "sampling seed; negative: a fixed seed derived from the request id", "TANDEM_SEED");
  flags.Int("threads", &o.threads, "CPU threads (0: all cores)", "TANDEM_THREADS");
  flags.Bool("print-ids", &o.print_ids, "also print prompt_ids: and output_ids: lines");
  flags.Int("kv-cache-mb", &o.kv_cache_mb, "KV cache size in MiB", "TANDEM_KV_CACHE_MB");
  std::string cpu_isa = "auto";
  flags.String("cpu-isa", &cpu_isa,
               "CPU kernels: auto (the best this CPU runs), generic, avx2 or avx512",
               "TANDEM_CPU_ISA");
  std::string bf16_matmul = "auto";
  flags.String("bf16-matmul", &bf16_matmul, std::string(kernels::kBf16MatMulFlagHelp),
               "TANDEM_BF16_MATMUL");

  if (absl::Status st = flags.Parse(argc, argv, env); !st.ok()) return st;
  if (flags.help_requested()) {
    parsed.help = true;
    parsed.help_text = flags.Help();
    return parsed;
  }
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional().front(), "' (see --help)"));
  }
  if (o.model.empty()) {
    return absl::InvalidArgumentError("--model is required (or set TANDEM_MODEL)");
  }
  if (o.max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens must be >= 1, got ", o.max_tokens));
  }
  if (o.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 0, got ", o.threads));
  }
  if (o.kv_cache_mb < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-cache-mb must be >= 1, got ", o.kv_cache_mb));
  }
  std::string cpu_isa_error;
  const std::optional<kernels::CpuIsa> isa =
      kernels::ParseAvailableCpuIsa(cpu_isa, &cpu_isa_error);
  if (!isa) return absl::InvalidArgumentError("--cpu-isa " + cpu_isa_error);
  o.cpu_isa = *isa;
  if (bf16_matmul != "auto") {
    std::string bf16_matmul_error;
    const std::optional<kernels::Bf16MatMul> mode =
        kernels::ParseAvailableBf16MatMul(bf16_matmul, *isa, &bf16_matmul_error);
    if (!mode) return absl::InvalidArgumentError("--bf16-matmul " + bf16_matmul_error);
    o.bf16_matmul = *mode;
  }
  // Sampling ranges are checked by the engine with the same messages the servers give.
  return parsed;
}

}  // namespace tandem::generate
