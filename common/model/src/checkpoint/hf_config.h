#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/safetensors.h"
#include "tandem/model/deepseek_v3.h"
#include "tandem/model/deepseek_v4.h"
#include "tandem/model/llama.h"

namespace tandem::model::internal {

// A Hugging Face config.json reduced to what the supported architectures need. Accepts both the
// transformers 5 spelling (rope_parameters with rope_theta inside) and the older one
// (rope_scaling with "type", rope_theta at the top level).
struct HfConfig {
  std::string architecture;  // architectures[0]
  Architecture arch = Architecture::kLlama;
  bool tie_word_embeddings = false;
  LlamaConfig llama;             // arch == kLlama
  DeepseekV3Config deepseek;     // arch == kDeepseekV3
  DeepseekV4Config deepseek_v4;  // arch == kDeepseekV4
  Fp8BlockSize fp8_block;        // from quantization_config
};

// `source` names the file in errors.
absl::StatusOr<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& source);
absl::StatusOr<HfConfig> ReadHfConfig(const std::string& dir);

}  // namespace tandem::model::internal
