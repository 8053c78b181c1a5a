#include "hf_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::model::internal {
namespace {

using Json = nlohmann::json;

// Config parsing is a startup boundary: field errors are thrown as ConfigError and turned into a
// Status by ParseHfConfig.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(const std::string& msg) { throw ConfigError(msg); }

bool Has(const Json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

double Number(const Json& j, const char* key) {
  if (!Has(j, key)) Fail(absl::StrCat("missing field ", key));
  const Json& v = j.at(key);
  if (!v.is_number()) Fail(absl::StrCat("field ", key, " is not a number"));
  return v.get<double>();
}

double Number(const Json& j, const char* key, double fallback) {
  return Has(j, key) ? Number(j, key) : fallback;
}

int Int(const Json& j, const char* key) {
  if (!Has(j, key)) Fail(absl::StrCat("missing field ", key));
  const Json& v = j.at(key);
  if (!v.is_number_integer()) Fail(absl::StrCat("field ", key, " is not an integer"));
  const auto x = v.get<std::int64_t>();
  if (x < 0 || x > (std::int64_t{1} << 30)) Fail(absl::StrCat("field ", key, " is out of range"));
  return static_cast<int>(x);
}

int Int(const Json& j, const char* key, int fallback) {
  return Has(j, key) ? Int(j, key) : fallback;
}

bool Bool(const Json& j, const char* key, bool fallback) {
  if (!Has(j, key)) return fallback;
  if (!j.at(key).is_boolean()) Fail(absl::StrCat("field ", key, " is not a boolean"));
  return j.at(key).get<bool>();
}

std::string String(const Json& j, const char* key, const std::string& fallback) {
  if (!Has(j, key)) return fallback;
  if (!j.at(key).is_string()) Fail(absl::StrCat("field ", key, " is not a string"));
  return j.at(key).get<std::string>();
}

// eos_token_id may be a list; the first entry is the primary one.
int TokenId(const Json& j, const char* key, int fallback) {
  if (!Has(j, key)) return fallback;
  const Json& v = j.at(key);
  if (v.is_array()) {
    if (v.empty() || !v[0].is_number_integer()) Fail(absl::StrCat("field ", key, " is malformed"));
    return v[0].get<int>();
  }
  return Int(j, key);
}

void ParseRope(const Json& j, int max_positions, float* theta, RopeScaling* s) {
  const Json* rope = nullptr;
  if (Has(j, "rope_parameters") && j.at("rope_parameters").is_object()) {
    rope = &j.at("rope_parameters");
  } else if (Has(j, "rope_scaling") && j.at("rope_scaling").is_object()) {
    rope = &j.at("rope_scaling");
  }
  const Json empty = Json::object();
  const Json& r = rope != nullptr ? *rope : empty;
  *theta = static_cast<float>(Number(r, "rope_theta", Number(j, "rope_theta", 10000.0)));
  if (Number(r, "partial_rotary_factor", 1.0) != 1.0)
    Fail("partial_rotary_factor is not supported");
  const std::string type = String(r, "rope_type", String(r, "type", "default"));
  if (type == "default") {
    s->type = RopeScalingType::kNone;
    return;
  }
  s->factor = static_cast<float>(Number(r, "factor", 1.0));
  const int original = Int(r, "original_max_position_embeddings",
                           Int(j, "original_max_position_embeddings", max_positions));
  s->original_max_position_embeddings = original;
  if (type == "linear") {
    s->type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    s->type = RopeScalingType::kLlama3;
    s->low_freq_factor = static_cast<float>(Number(r, "low_freq_factor"));
    s->high_freq_factor = static_cast<float>(Number(r, "high_freq_factor"));
    if (s->high_freq_factor <= s->low_freq_factor)
      Fail("llama3 rope needs high_freq_factor > low_freq_factor");
  } else if (type == "yarn") {
    s->type = RopeScalingType::kYarn;
    if (!Has(r, "factor")) s->factor = static_cast<float>(max_positions) / original;
    if (Has(r, "attention_factor")) Fail("yarn attention_factor is not supported");
    if (!Bool(r, "truncate", true)) Fail("yarn truncate=false is not supported");
    // transformers treats 0 like absent for these two ("or 32", "or 1").
    s->beta_fast = static_cast<float>(Number(r, "beta_fast", 32.0));
    if (s->beta_fast == 0.0f) s->beta_fast = 32.0f;
    s->beta_slow = static_cast<float>(Number(r, "beta_slow", 1.0));
    if (s->beta_slow == 0.0f) s->beta_slow = 1.0f;
    s->mscale = static_cast<float>(Number(r, "mscale", 0.0));  // 0: absent
    s->mscale_all_dim = static_cast<float>(Number(r, "mscale_all_dim", 0.0));
  } else {
    Fail(absl::StrCat("rope type \"", type, "\" is not supported"));
  }
  if (s->factor <= 0.0f) Fail("rope factor must be positive");
  if (original <= 0) Fail("original_max_position_embeddings must be positive");
}

ModelConfig ParseBase(const Json& j, Architecture arch) {
  ModelConfig b;
  b.arch = arch;
  b.vocab_size = Int(j, "vocab_size");
  b.hidden_size = Int(j, "hidden_size");
  b.num_layers = Int(j, "num_hidden_layers");
  b.max_position_embeddings = Int(j, "max_position_embeddings", 4096);
  b.bos_token_id = TokenId(j, "bos_token_id", b.bos_token_id);
  b.eos_token_id = TokenId(j, "eos_token_id", b.eos_token_id);
  if (b.vocab_size <= 0 || b.hidden_size <= 0 || b.num_layers <= 0) {
    Fail("vocab_size, hidden_size and num_hidden_layers must be positive");
  }
  return b;
}

void RejectUnsupported(const Json& j) {
  if (Bool(j, "attention_bias", false)) Fail("attention_bias=true is not supported");
  if (Bool(j, "mlp_bias", false)) Fail("mlp_bias=true is not supported");
  const std::string act = String(j, "hidden_act", "silu");
  if (act != "silu") Fail(absl::StrCat("hidden_act \"", act, "\" is not supported"));
}

LlamaConfig ParseLlama(const Json& j) {
  LlamaConfig c;
  c.base = ParseBase(j, Architecture::kLlama);
  c.intermediate_size = Int(j, "intermediate_size");
  c.num_heads = Int(j, "num_attention_heads");
  c.num_kv_heads = Int(j, "num_key_value_heads", c.num_heads);
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    Fail("num_attention_heads must be a positive multiple of num_key_value_heads");
  }
  c.head_dim = Int(j, "head_dim", c.base.hidden_size / c.num_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) Fail("head_dim must be positive and even");
  c.rms_norm_eps = static_cast<float>(Number(j, "rms_norm_eps", 1e-6));
  ParseRope(j, c.base.max_position_embeddings, &c.rope_theta, &c.rope_scaling);
  c.rope_layout = kernels::RopeLayout::kHalfSplit;  // HF stores q/k permuted for half-split rope
  return c;
}

DeepseekV3Config ParseDeepseekV3(const Json& j) {
  DeepseekV3Config c;
  c.base = ParseBase(j, Architecture::kDeepseekV3);
  c.intermediate_size = Int(j, "intermediate_size");
  c.moe_intermediate_size = Int(j, "moe_intermediate_size", 0);
  c.num_heads = Int(j, "num_attention_heads");
  c.q_lora_rank = Int(j, "q_lora_rank", 0);
  c.kv_lora_rank = Int(j, "kv_lora_rank");
  c.qk_nope_head_dim = Int(j, "qk_nope_head_dim");
  c.qk_rope_head_dim = Int(j, "qk_rope_head_dim");
  c.v_head_dim = Int(j, "v_head_dim");
  c.n_routed_experts = Int(j, "n_routed_experts", 0);
  c.n_shared_experts = Int(j, "n_shared_experts", 0);
  c.num_experts_per_tok = Int(j, "num_experts_per_tok", 0);
  c.n_group = Int(j, "n_group", 1);
  c.topk_group = Int(j, "topk_group", 1);
  c.first_k_dense_replace = Int(j, "first_k_dense_replace", 0);
  c.norm_topk_prob = Bool(j, "norm_topk_prob", true);
  c.routed_scaling_factor = static_cast<float>(Number(j, "routed_scaling_factor", 1.0));
  c.rms_norm_eps = static_cast<float>(Number(j, "rms_norm_eps", 1e-6));
  ParseRope(j, c.base.max_position_embeddings, &c.rope_theta, &c.rope_scaling);
  c.rope_layout = Bool(j, "rope_interleave", true) ? kernels::RopeLayout::kInterleaved
                                                   : kernels::RopeLayout::kHalfSplit;
  c.num_nextn_predict_layers = Int(j, "num_nextn_predict_layers", Int(j, "num_mtp_layers", 0));
  const std::string scoring = String(j, "scoring_func", "sigmoid");
  if (scoring != "sigmoid") Fail(absl::StrCat("scoring_func \"", scoring, "\" is not supported"));
  const std::string topk = String(j, "topk_method", "noaux_tc");
  if (topk != "noaux_tc") Fail(absl::StrCat("topk_method \"", topk, "\" is not supported"));
  return c;
}

}  // namespace

absl::StatusOr<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  const Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is not a JSON object"));
  }
  try {
    HfConfig out;
    if (!Has(j, "architectures") || !j.at("architectures").is_array() ||
        j.at("architectures").empty() || !j.at("architectures")[0].is_string()) {
      Fail("missing architectures[0]");
    }
    out.architecture = j.at("architectures")[0].get<std::string>();
    RejectUnsupported(j);
    out.tie_word_embeddings = Bool(j, "tie_word_embeddings", false);
    if (out.architecture == "LlamaForCausalLM") {
      out.arch = Architecture::kLlama;
      out.llama = ParseLlama(j);
    } else if (out.architecture == "DeepseekV3ForCausalLM") {
      out.arch = Architecture::kDeepseekV3;
      out.deepseek = ParseDeepseekV3(j);
    } else {
      return absl::UnimplementedError(
          absl::StrCat(source, ": unsupported architecture ", out.architecture,
                       " (supported: LlamaForCausalLM, DeepseekV3ForCausalLM)"));
    }
    return out;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

absl::StatusOr<HfConfig> ReadHfConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseHfConfig(ss.str(), path);
}

}  // namespace tandem::model::internal
