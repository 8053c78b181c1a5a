#include "checkpoint/hf_config.h"

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

// V4 nests its two rope settings under rope_parameters.main / .compress (transformers 5) or
// ships the compressed layers' YaRN flat (older configs). Only YaRN's frequencies are used:
// transformers pins attention_factor to 1 for V4.
void ParseDeepseekV4Rope(const Json& j, DeepseekV4Config* c) {
  c->rope_theta = static_cast<float>(Number(j, "rope_theta", 10000.0));
  c->compress_rope_theta = static_cast<float>(Number(j, "compress_rope_theta", 160000.0));
  Json compress = Json::object();
  if (Has(j, "rope_parameters") && j.at("rope_parameters").is_object()) {
    const Json& rp = j.at("rope_parameters");
    if (Has(rp, "main") && rp.at("main").is_object()) {
      c->rope_theta = static_cast<float>(Number(rp.at("main"), "rope_theta", c->rope_theta));
      if (String(rp.at("main"), "rope_type", "default") != "default")
        Fail("rope_parameters.main: only the default rope is supported");
      if (Has(rp, "compress") && rp.at("compress").is_object()) compress = rp.at("compress");
    } else {
      compress = rp;
    }
  } else if (Has(j, "rope_scaling") && j.at("rope_scaling").is_object()) {
    compress = j.at("rope_scaling");
  }
  if (Number(compress, "attention_factor", 1.0) != 1.0)
    Fail("rope_parameters.compress.attention_factor other than 1 is not supported");
  compress.erase("attention_factor");
  compress.erase("partial_rotary_factor");
  compress["rope_theta"] = c->compress_rope_theta;
  Json holder = Json::object();
  holder["rope_parameters"] = compress;
  float theta = 0.0f;
  ParseRope(holder, c->base.max_position_embeddings, &theta, &c->compress_rope_scaling);
  c->compress_rope_theta = theta;
  if (c->compress_rope_scaling.type != RopeScalingType::kNone &&
      c->compress_rope_scaling.type != RopeScalingType::kYarn) {
    Fail("rope_parameters.compress: only default or yarn rope is supported");
  }
}

// layer_types, or the older per-layer compress_ratios (0 / 4 / 128), or transformers' default
// schedule (two HCA layers, then CSA and HCA alternating).
std::vector<DeepseekV4AttentionKind> ParseDeepseekV4LayerTypes(const Json& j, int n) {
  std::vector<DeepseekV4AttentionKind> kinds;
  if (Has(j, "layer_types")) {
    const Json& types = j.at("layer_types");
    if (!types.is_array() || static_cast<int>(types.size()) < n) {
      Fail("layer_types must list every layer");
    }
    for (int i = 0; i < n; ++i) {
      const std::string type = types[i].is_string() ? types[i].get<std::string>() : "";
      if (type == "sliding_attention") {
        kinds.push_back(DeepseekV4AttentionKind::kSliding);
      } else if (type == "compressed_sparse_attention") {
        kinds.push_back(DeepseekV4AttentionKind::kCompressedSparse);
      } else if (type == "heavily_compressed_attention") {
        kinds.push_back(DeepseekV4AttentionKind::kHeavilyCompressed);
      } else {
        Fail(absl::StrCat("layer_types[", i, "] \"", type, "\" is not supported"));
      }
    }
  } else if (Has(j, "compress_ratios")) {
    const Json& ratios = j.at("compress_ratios");
    if (!ratios.is_array() || static_cast<int>(ratios.size()) < n) {
      Fail("compress_ratios must list every layer");
    }
    for (int i = 0; i < n; ++i) {
      const int r = ratios[i].is_number_integer() ? ratios[i].get<int>() : -1;
      if (r == 0) {
        kinds.push_back(DeepseekV4AttentionKind::kSliding);
      } else if (r == 4) {
        kinds.push_back(DeepseekV4AttentionKind::kCompressedSparse);
      } else if (r == 128) {
        kinds.push_back(DeepseekV4AttentionKind::kHeavilyCompressed);
      } else {
        Fail(absl::StrCat("compress_ratios[", i, "] must be 0, 4 or 128"));
      }
    }
  } else {
    for (int i = 0; i < n; ++i) {
      kinds.push_back(i < 2 || i % 2 == 0 ? DeepseekV4AttentionKind::kHeavilyCompressed
                                          : DeepseekV4AttentionKind::kCompressedSparse);
    }
  }
  return kinds;
}

DeepseekV4Config ParseDeepseekV4(const Json& j) {
  DeepseekV4Config c;
  c.base = ParseBase(j, Architecture::kDeepseekV4);
  const int n = c.base.num_layers;
  c.moe_intermediate_size = Int(j, "moe_intermediate_size");
  c.num_heads = Int(j, "num_attention_heads");
  if (Int(j, "num_key_value_heads", 1) != 1) Fail("num_key_value_heads must be 1");
  c.head_dim = Int(j, "head_dim");
  const double partial = Has(j, "partial_rotary_factor")
                             ? Number(j, "partial_rotary_factor")
                             : (Has(j, "qk_rope_head_dim") && c.head_dim > 0
                                    ? static_cast<double>(Int(j, "qk_rope_head_dim")) / c.head_dim
                                    : 64.0 / 512.0);
  c.rope_dim = static_cast<int>(c.head_dim * partial);
  c.q_lora_rank = Int(j, "q_lora_rank");
  c.o_groups = Int(j, "o_groups");
  c.o_lora_rank = Int(j, "o_lora_rank");
  c.n_routed_experts = Int(j, "n_routed_experts");
  c.num_experts_per_tok = Int(j, "num_experts_per_tok");
  c.routed_scaling_factor = static_cast<float>(Number(j, "routed_scaling_factor", 1.0));
  c.swiglu_limit = static_cast<float>(Number(j, "swiglu_limit", 10.0));
  c.rms_norm_eps = static_cast<float>(Number(j, "rms_norm_eps", 1e-6));
  c.sliding_window = Int(j, "sliding_window");
  c.index_n_heads = Int(j, "index_n_heads");
  c.index_head_dim = Int(j, "index_head_dim");
  c.index_topk = Int(j, "index_topk");
  c.hc_mult = Int(j, "hc_mult");
  c.hc_sinkhorn_iters = Int(j, "hc_sinkhorn_iters");
  c.hc_eps = static_cast<float>(Number(j, "hc_eps", 1e-6));
  c.num_nextn_predict_layers = Int(j, "num_nextn_predict_layers", 0);
  const std::string scoring = String(j, "scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus")
    Fail(absl::StrCat("scoring_func \"", scoring, "\" is not supported"));
  if (Has(j, "compress_rates")) {
    const Json& r = j.at("compress_rates");
    if (!r.is_object()) Fail("field compress_rates is not an object");
    c.csa_rate = Int(r, "compressed_sparse_attention", c.csa_rate);
    c.hca_rate = Int(r, "heavily_compressed_attention", c.hca_rate);
  }
  c.csa_rate = Int(j, "compress_rate_csa", c.csa_rate);
  c.hca_rate = Int(j, "compress_rate_hca", c.hca_rate);
  c.attention_kinds = ParseDeepseekV4LayerTypes(j, n);
  if (Has(j, "mlp_layer_types")) {
    const Json& m = j.at("mlp_layer_types");
    if (!m.is_array() || static_cast<int>(m.size()) < n) {
      Fail("mlp_layer_types must list every layer");
    }
    for (int i = 0; i < n; ++i) {
      const std::string type = m[i].is_string() ? m[i].get<std::string>() : "";
      if (type != "hash_moe" && type != "moe")
        Fail(absl::StrCat("mlp_layer_types[", i, "] \"", type, "\" is not supported"));
      c.hash_routed.push_back(type == "hash_moe");
    }
  } else {
    const int hash_layers = Int(j, "num_hash_layers", 3);
    for (int i = 0; i < n; ++i) c.hash_routed.push_back(i < hash_layers);
  }
  ParseDeepseekV4Rope(j, &c);
  return c;
}

// Only the block-wise FP8 scheme is read; any other quant_method would need dequantisation the
// loader does not do, so it is refused rather than run on misread weights.
Fp8BlockSize ParseQuantization(const Json& j) {
  Fp8BlockSize b;
  if (!Has(j, "quantization_config")) return b;
  const Json& q = j.at("quantization_config");
  if (!q.is_object()) Fail("quantization_config is not an object");
  const std::string method = String(q, "quant_method", "fp8");
  if (method != "fp8")
    Fail(absl::StrCat("quantization_config.quant_method \"", method,
                      "\" is not supported (fp8 is)"));
  const std::string fmt = String(q, "fmt", "e4m3");
  if (fmt != "e4m3") Fail(absl::StrCat("quantization_config.fmt \"", fmt, "\" is not supported"));
  if (Has(q, "weight_block_size")) {
    const Json& w = q.at("weight_block_size");
    if (!w.is_array() || w.size() != 2 || !w[0].is_number_integer() || !w[1].is_number_integer()) {
      Fail("quantization_config.weight_block_size must be two integers");
    }
    b.rows = w[0].get<int>();
    b.cols = w[1].get<int>();
  }
  // The kernels step through scales one 16-column chunk at a time, by shifting.
  if (b.rows <= 0 || b.cols < 16 || (b.cols & (b.cols - 1)) != 0) {
    Fail(absl::StrCat("quantization_config.weight_block_size [", b.rows, ", ", b.cols,
                      "] is not supported: rows must be positive, columns a power of two >= 16"));
  }
  return b;
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
    out.fp8_block = ParseQuantization(j);
    if (out.architecture == "LlamaForCausalLM") {
      out.arch = Architecture::kLlama;
      out.llama = ParseLlama(j);
    } else if (out.architecture == "DeepseekV3ForCausalLM") {
      out.arch = Architecture::kDeepseekV3;
      out.deepseek = ParseDeepseekV3(j);
    } else if (out.architecture == "DeepseekV4ForCausalLM") {
      out.arch = Architecture::kDeepseekV4;
      out.deepseek_v4 = ParseDeepseekV4(j);
    } else {
      return absl::UnimplementedError(
          absl::StrCat(source, ": unsupported architecture ", out.architecture,
                       " (supported: LlamaForCausalLM, DeepseekV3ForCausalLM, "
                       "DeepseekV4ForCausalLM)"));
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
