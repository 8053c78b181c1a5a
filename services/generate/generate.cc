#include "generate.h"

#include <vector>

#include "absl/strings/str_join.h"
#include "tandem/base/status_macros.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/tokenizer/model_tokenizer.h"

namespace tandem::generate {
namespace {

using tokenizer::LoadModelTokenizer;
using tokenizer::ModelTokenizer;

engine::SamplingParams SamplingFor(const GenerateOptions& o, const ModelTokenizer& tok) {
  engine::SamplingParams p;
  p.temperature = static_cast<float>(o.temperature);
  p.top_p = static_cast<float>(o.top_p);
  p.top_k = o.top_k;
  p.max_tokens = o.max_tokens;
  if (o.seed >= 0) p.seed = static_cast<std::uint64_t>(o.seed);
  if (tok.llama2c_conventions) {
    p.stop_token_ids = {tok.tokenizer->bos_id()};
    p.ignore_eos = true;
  }
  return p;
}

}  // namespace

absl::Status RunGenerate(const GenerateOptions& options, std::ostream& out) {
  kernels::Bf16MatMul bf16_matmul;
  if (options.bf16_matmul) {
    bf16_matmul = *options.bf16_matmul;
  } else {
    TANDEM_ASSIGN_OR_RETURN(const kernels::DType weights,
                            model::PredominantMatrixDtype(options.model));
    bf16_matmul = kernels::AutoBf16MatMul(options.cpu_isa, weights);
  }
  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackend(
      {.num_threads = options.threads, .isa = options.cpu_isa, .bf16_matmul = bf16_matmul});
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model,
                          model::LoadModel(options.model, {}, backend.get()));
  TANDEM_ASSIGN_OR_RETURN(ModelTokenizer tok,
                          LoadModelTokenizer(options.model, model->config().vocab_size));
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::int32_t> prompt_ids,
                          tok.tokenizer->Encode(options.prompt, /*add_bos=*/true));

  engine::EngineConfig config;
  config.kv_cache_bytes = static_cast<std::int64_t>(options.kv_cache_mb) << 20;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng,
                          engine::Engine::Create(model.get(), backend.get(), config));
  const engine::SamplingParams params = SamplingFor(options, tok);
  TANDEM_ASSIGN_OR_RETURN(engine::GenerateResult result,
                          eng->Generate(prompt_ids, params, "tandem-generate"));

  std::vector<std::int32_t> output_ids = result.tokens;
  if (result.finish_reason == engine::FinishReason::kStop && !output_ids.empty()) {
    output_ids.pop_back();
  }
  std::vector<std::int32_t> all = prompt_ids;
  all.insert(all.end(), output_ids.begin(), output_ids.end());
  TANDEM_ASSIGN_OR_RETURN(std::string text, tok.tokenizer->Decode(all));
  out << text << "\n";
  if (options.print_ids) {
    out << "prompt_ids: " << absl::StrJoin(prompt_ids, " ") << "\n";
    out << "output_ids: " << absl::StrJoin(output_ids, " ") << "\n";
  }
  out.flush();
  return out.good() ? absl::OkStatus() : absl::DataLossError("writing the output failed");
}

}  // namespace tandem::generate
