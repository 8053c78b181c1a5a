// llama2.c legacy checkpoints: a 7 x int32 header, then float32 tensors back to back. The weights
// are used in place from the memory mapping.
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "checkpoint/loader_internal.h"
#include "checkpoint/weight_checks.h"
#include "tandem/base/mapped_file.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/llama.h"

namespace tandem::model::internal {
namespace {

struct Llama2cHeader {
  std::int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};
constexpr std::size_t kHeaderBytes = 7 * sizeof(std::int32_t);
static_assert(sizeof(Llama2cHeader) == kHeaderBytes);

// Bounds far above any llama2.c model; they keep size arithmetic far from int64 overflow.
constexpr std::int32_t kMaxDim = 1 << 16;
constexpr std::int32_t kMaxLayers = 1 << 10;
constexpr std::int32_t kMaxVocab = 1 << 22;
constexpr std::int32_t kMaxSeqLen = 1 << 22;

absl::Status CheckRange(const std::string& file, const char* field, std::int64_t value,
                        std::int64_t max) {
  if (value <= 0 || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": header field ", field, " is ", value, ", expected 1..", max));
  }
  return absl::OkStatus();
}

absl::Status ValidateHeader(const std::string& file, const Llama2cHeader& h) {
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "dim", h.dim, kMaxDim));
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "hidden_dim", h.hidden_dim, 4 * kMaxDim));
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "n_layers", h.n_layers, kMaxLayers));
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "n_heads", h.n_heads, h.dim));
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "n_kv_heads", h.n_kv_heads, h.n_heads));
  // vocab_size's sign only says whether the classifier is shared.
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "|vocab_size|",
                                    std::abs(static_cast<std::int64_t>(h.vocab_size)), kMaxVocab));
  TANDEM_RETURN_IF_ERROR(CheckRange(file, "seq_len", h.seq_len, kMaxSeqLen));
  if (h.dim % h.n_heads != 0 || (h.dim / h.n_heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": dim ", h.dim, " must split into n_heads ", h.n_heads, " heads of even size"));
  }
  if (h.n_heads % h.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": n_heads ", h.n_heads, " is not a multiple of n_kv_heads ", h.n_kv_heads));
  }
  return absl::OkStatus();
}

// Hands out consecutive float32 tensors of the checkpoint.
class TensorCursor {
 public:
  explicit TensorCursor(const std::uint8_t* data) : next_(data) {}
  kernels::WeightView Take(std::int64_t rows, std::int64_t cols) {
    kernels::WeightView w{next_, kernels::DType::kF32, rows, cols};
    next_ += rows * cols * static_cast<std::int64_t>(sizeof(float));
    return w;
  }
  void Skip(std::int64_t floats) { next_ += floats * static_cast<std::int64_t>(sizeof(float)); }

 private:
  const std::uint8_t* next_;
};

std::string ServedName(const std::string& file, const LoadOptions& options) {
  if (!options.served_name.empty()) return options.served_name;
  const std::filesystem::path dir = std::filesystem::absolute(file).parent_path();
  return dir.filename().string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadLlama2c(const std::string& file,
                                                   const LoadOptions& options,
                                                   kernels::Backend* backend) {
  TANDEM_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(file));
  if (mapped.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", mapped.size(),
                                                   " bytes, too short for the ", kHeaderBytes,
                                                   "-byte llama2.c header"));
  }
  Llama2cHeader h;
  std::memcpy(&h, mapped.data(), kHeaderBytes);
  TANDEM_RETURN_IF_ERROR(ValidateHeader(file, h));

  const bool shared_classifier = h.vocab_size > 0;
  const std::int64_t vocab = std::abs(static_cast<std::int64_t>(h.vocab_size));
  const std::int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers;
  const std::int64_t head_dim = dim / h.n_heads;
  const std::int64_t kv_dim = head_dim * h.n_kv_heads;
  const std::int64_t rope_table = static_cast<std::int64_t>(h.seq_len) * head_dim / 2;
  const std::int64_t floats = vocab * dim                               // token_embedding
                              + layers * (2 * dim                       // rms_att, rms_ffn
                                          + 2 * dim * dim               // wq, wo
                                          + 2 * kv_dim * dim            // wk, wv
                                          + 3 * hidden * dim)           // w1, w2, w3
                              + dim                                     // rms_final
                              + 2 * rope_table                          // freq_cis_real/imag
                              + (shared_classifier ? 0 : vocab * dim);  // wcls
  const std::int64_t expected = static_cast<std::int64_t>(kHeaderBytes) + floats * 4;
  if (static_cast<std::int64_t>(mapped.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": header (dim ", dim, ", hidden_dim ", hidden, ", n_layers ", layers, ", n_heads ",
        h.n_heads, ", n_kv_heads ", h.n_kv_heads, ", vocab_size ", h.vocab_size, ", seq_len ",
        h.seq_len, ") implies ", expected, " bytes, file has ", mapped.size(),
        static_cast<std::int64_t>(mapped.size()) < expected ? " (truncated)" : ""));
  }

  // llama2.c stores each kind of tensor for all layers together.
  TensorCursor cur(mapped.data() + kHeaderBytes);
  LlamaWeights w;
  w.layers.resize(layers);
  w.embed = cur.Take(vocab, dim);
  for (auto& l : w.layers) l.attn_norm = cur.Take(1, dim);
  for (auto& l : w.layers) l.wq = cur.Take(dim, dim);
  for (auto& l : w.layers) l.wk = cur.Take(kv_dim, dim);
  for (auto& l : w.layers) l.wv = cur.Take(kv_dim, dim);
  for (auto& l : w.layers) l.wo = cur.Take(dim, dim);
  for (auto& l : w.layers) l.ffn_norm = cur.Take(1, dim);
  for (auto& l : w.layers) l.w_gate = cur.Take(hidden, dim);  // w1
  for (auto& l : w.layers) l.w_down = cur.Take(dim, hidden);  // w2
  for (auto& l : w.layers) l.w_up = cur.Take(hidden, dim);    // w3
  w.final_norm = cur.Take(1, dim);
  cur.Skip(2 * rope_table);  // recomputed from theta instead
  w.lm_head = shared_classifier ? w.embed : cur.Take(vocab, dim);

  if (options.check_finite) {
    TANDEM_RETURN_IF_ERROR(CheckFinite("token_embedding", w.embed));
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const LlamaLayerWeights& lw = w.layers[l];
      const std::string p = absl::StrCat("layers.", l, ".");
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "rms_att", lw.attn_norm));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "wq", lw.wq));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "wk", lw.wk));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "wv", lw.wv));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "wo", lw.wo));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "rms_ffn", lw.ffn_norm));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "w1", lw.w_gate));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "w2", lw.w_down));
      TANDEM_RETURN_IF_ERROR(CheckFinite(p + "w3", lw.w_up));
    }
    TANDEM_RETURN_IF_ERROR(CheckFinite("rms_final", w.final_norm));
    if (!shared_classifier) TANDEM_RETURN_IF_ERROR(CheckFinite("wcls", w.lm_head));
  }

  LlamaConfig config;
  config.base.arch = Architecture::kLlama;
  config.base.name = ServedName(file, options);
  config.base.vocab_size = static_cast<int>(vocab);
  config.base.hidden_size = h.dim;
  config.base.num_layers = h.n_layers;
  config.base.max_position_embeddings = h.seq_len;
  config.base.bos_token_id = 1;
  config.base.eos_token_id = 2;
  config.intermediate_size = h.hidden_dim;
  config.num_heads = h.n_heads;
  config.num_kv_heads = h.n_kv_heads;
  config.head_dim = static_cast<int>(head_dim);
  config.rms_norm_eps = 1e-5f;
  config.rope_theta = 10000.0f;
  config.rope_layout = kernels::RopeLayout::kInterleaved;

  std::vector<MappedFile> storage;
  storage.push_back(std::move(mapped));
  return CreateLlamaModel(std::move(config), std::move(w), std::move(storage), backend);
}

}  // namespace tandem::model::internal
