// DeepSeek-VL's vision tower as transformers 5 implements DeepseekVLModel.get_image_features:
// SiglipVisionModel (Conv2d patch embedding + learned position table, pre-LN encoder layers with
// biased q/k/v/out projections and a GELU MLP, post LayerNorm) and DeepseekVLAligner
// (Linear -> exact GELU -> Linear). Tensor names are save_pretrained's, with or without the
// "model." of DeepseekVLForConditionalGeneration.
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"
#include "vision/vision_towers.h"

namespace tandem::model::internal {
namespace {

struct SiglipConfig {
  int hidden = 0, inter = 0, layers = 0, heads = 0, image_size = 0, patch = 0, text_hidden = 0;
  float eps = 1e-6f;
  kernels::GeluForm act = kernels::GeluForm::kTanh;
  PixelNorm norm;
  int grid() const { return image_size / patch; }
};

struct SiglipLayer {
  kernels::WeightView ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, fc1, fc1_b, fc2,
      fc2_b;
};

struct SiglipWeights {
  kernels::WeightView patch_w, patch_b, pos;
  std::vector<SiglipLayer> layers;
  kernels::WeightView post_w, post_b, al1, al1_b, al2, al2_b;
};

absl::StatusOr<SiglipConfig> ParseConfig(const VisionJson& root, const VisionJson* pre,
                                         const std::string& src) {
  const auto vc = root.find("vision_config");
  const auto tc = root.find("text_config");
  if (vc == root.end() || !vc->is_object() || tc == root.end() || !tc->is_object()) {
    return absl::InvalidArgumentError(src + ": needs vision_config and text_config objects");
  }
  const std::string vsrc = src + " vision_config";
  SiglipConfig c;
  // Defaults are SiglipVisionConfig's and LlamaConfig's, for configs saved as a diff.
  TANDEM_ASSIGN_OR_RETURN(c.hidden, JsonIntOr(*vc, "hidden_size", 768, 1, 16384, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.inter, JsonIntOr(*vc, "intermediate_size", 3072, 1, 65536, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.layers, JsonIntOr(*vc, "num_hidden_layers", 12, 1, 256, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.heads, JsonIntOr(*vc, "num_attention_heads", 12, 1, 1024, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.image_size, JsonIntOr(*vc, "image_size", 224, 1, kMaxVisionSide, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.patch, JsonIntOr(*vc, "patch_size", 16, 1, 1024, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.eps, JsonFloatOr(*vc, "layer_norm_eps", 1e-6f, 0.0f, 1.0f, vsrc));
  TANDEM_ASSIGN_OR_RETURN(int channels, JsonIntOr(*vc, "num_channels", 3, 1, 16, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.text_hidden,
                          JsonIntOr(*tc, "hidden_size", 4096, 1, 65536, src + " text_config"));
  if (channels != 3) return absl::InvalidArgumentError(vsrc + ": num_channels must be 3 (RGB)");
  if (c.hidden % c.heads != 0) {
    return absl::InvalidArgumentError(vsrc + ": hidden_size must be a multiple of heads");
  }
  if (c.image_size % c.patch != 0) {
    return absl::InvalidArgumentError(vsrc + ": image_size must be a multiple of patch_size");
  }
  const std::string act = vc->value("hidden_act", std::string("gelu_pytorch_tanh"));
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast") {
    c.act = kernels::GeluForm::kTanh;
  } else if (act == "gelu") {
    c.act = kernels::GeluForm::kErf;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        vsrc, ": hidden_act \"", act, "\" is not supported (gelu, gelu_pytorch_tanh)"));
  }
  // DeepseekVLImageProcessor's defaults: CLIP's mean and std, rescale 1/255.
  c.norm.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  c.norm.std = {0.26862954f, 0.26130258f, 0.27577711f};
  if (pre != nullptr) {
    const std::string psrc = "preprocessor_config.json";
    if (pre->contains("image_mean")) {
      TANDEM_ASSIGN_OR_RETURN(c.norm.mean, JsonFloat3(*pre, "image_mean", -10.0f, 10.0f, psrc));
    }
    if (pre->contains("image_std")) {
      TANDEM_ASSIGN_OR_RETURN(c.norm.std, JsonFloat3(*pre, "image_std", 1e-6f, 100.0f, psrc));
    }
    TANDEM_ASSIGN_OR_RETURN(c.norm.rescale,
                            JsonFloatOr(*pre, "rescale_factor", 1.0f / 255.0f, 1e-9f, 1.0f, psrc));
  }
  return c;
}

absl::StatusOr<SiglipWeights> MapWeights(const SiglipConfig& c, const WeightTaker& t) {
  const std::int64_t d = c.hidden, n = static_cast<std::int64_t>(c.grid()) * c.grid();
  SiglipWeights w;
  const std::string e = "vision_model.embeddings.";
  TANDEM_ASSIGN_OR_RETURN(w.patch_w, t.PatchConv(e + "patch_embedding.weight", d, c.patch));
  TANDEM_ASSIGN_OR_RETURN(w.patch_b, t.Vector(e + "patch_embedding.bias", d));
  TANDEM_ASSIGN_OR_RETURN(w.pos, t.Matrix(e + "position_embedding.weight", n, d));
  w.layers.resize(c.layers);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = absl::StrCat("vision_model.encoder.layers.", i, ".");
    SiglipLayer& l = w.layers[i];
    TANDEM_ASSIGN_OR_RETURN(l.ln1_w, t.Vector(p + "layer_norm1.weight", d));
    TANDEM_ASSIGN_OR_RETURN(l.ln1_b, t.Vector(p + "layer_norm1.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.wq, t.Matrix(p + "self_attn.q_proj.weight", d, d));
    TANDEM_ASSIGN_OR_RETURN(l.bq, t.Vector(p + "self_attn.q_proj.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.wk, t.Matrix(p + "self_attn.k_proj.weight", d, d));
    TANDEM_ASSIGN_OR_RETURN(l.bk, t.Vector(p + "self_attn.k_proj.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.wv, t.Matrix(p + "self_attn.v_proj.weight", d, d));
    TANDEM_ASSIGN_OR_RETURN(l.bv, t.Vector(p + "self_attn.v_proj.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.wo, t.Matrix(p + "self_attn.out_proj.weight", d, d));
    TANDEM_ASSIGN_OR_RETURN(l.bo, t.Vector(p + "self_attn.out_proj.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.ln2_w, t.Vector(p + "layer_norm2.weight", d));
    TANDEM_ASSIGN_OR_RETURN(l.ln2_b, t.Vector(p + "layer_norm2.bias", d));
    TANDEM_ASSIGN_OR_RETURN(l.fc1, t.Matrix(p + "mlp.fc1.weight", c.inter, d));
    TANDEM_ASSIGN_OR_RETURN(l.fc1_b, t.Vector(p + "mlp.fc1.bias", c.inter));
    TANDEM_ASSIGN_OR_RETURN(l.fc2, t.Matrix(p + "mlp.fc2.weight", d, c.inter));
    TANDEM_ASSIGN_OR_RETURN(l.fc2_b, t.Vector(p + "mlp.fc2.bias", d));
  }
  TANDEM_ASSIGN_OR_RETURN(w.post_w, t.Vector("vision_model.post_layernorm.weight", d));
  TANDEM_ASSIGN_OR_RETURN(w.post_b, t.Vector("vision_model.post_layernorm.bias", d));
  TANDEM_ASSIGN_OR_RETURN(w.al1, t.Matrix("aligner.linear1.weight", c.text_hidden, d));
  TANDEM_ASSIGN_OR_RETURN(w.al1_b, t.Vector("aligner.linear1.bias", c.text_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.al2, t.Matrix("aligner.linear2.weight", c.text_hidden, c.text_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.al2_b, t.Vector("aligner.linear2.bias", c.text_hidden));
  return w;
}

class DeepseekVlTower final : public VisionTower {
 public:
  DeepseekVlTower(SiglipConfig c, SiglipWeights w, std::vector<MappedFile> mappings,
                  std::string fingerprint, kernels::Backend* backend)
      : c_(c),
        w_(std::move(w)),
        mappings_(std::move(mappings)),
        fingerprint_(std::move(fingerprint)),
        backend_(backend) {}

  std::string_view kind() const override { return "deepseek_vl"; }
  int hidden_size() const override { return c_.text_hidden; }
  const std::string& fingerprint() const override { return fingerprint_; }

  absl::StatusOr<int> OutputRows(int width, int height) const override {
    if (width != c_.image_size || height != c_.image_size) {
      // SigLIP's position table is learned for one grid; transformers' DeepseekVLModel does not
      // interpolate it either, so other sizes are the preprocessor's job (resize and pad).
      return absl::InvalidArgumentError(absl::StrCat("the DeepSeek-VL tower takes ", c_.image_size,
                                                     "x", c_.image_size, " images, not ", width,
                                                     "x", height));
    }
    return c_.grid() * c_.grid();
  }

  absl::StatusOr<std::vector<float>> Encode(int width, int height,
                                            absl::Span<const std::uint8_t> rgb) const override {
    TANDEM_RETURN_IF_ERROR(ValidateRgb(width, height, rgb, kMaxVisionSide, kMaxVisionPixels));
    TANDEM_ASSIGN_OR_RETURN(const int n, OutputRows(width, height));
    kernels::Backend& b = *backend_;
    const std::int64_t d = c_.hidden;
    const std::int64_t patch_dim = 3LL * c_.patch * c_.patch;
    BackendFloats patches(backend_, n * patch_dim), x(backend_, n * d), h(backend_, n * d),
        q(backend_, n * d), k(backend_, n * d), v(backend_, n * d), att(backend_, n * d),
        ff(backend_, n * std::max<std::int64_t>(c_.inter, c_.text_hidden));
    ExtractPatches(rgb.data(), width, height, c_.patch, c_.norm, patches.get());
    Linear(b, patches.get(), n, w_.patch_w, w_.patch_b, x.get());
    std::vector<std::int32_t> positions(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) positions[i] = i;
    b.Embed(w_.pos, positions.data(), n, h.get());
    b.Axpy(1.0f, h.get(), n * d, x.get());
    const FullAttentionShape shape{n, c_.heads, static_cast<int>(d / c_.heads)};
    for (const SiglipLayer& l : w_.layers) {
      b.LayerNorm(x.get(), n, d, l.ln1_w, l.ln1_b, c_.eps, h.get());
      Linear(b, h.get(), n, l.wq, l.bq, q.get());
      Linear(b, h.get(), n, l.wk, l.bk, k.get());
      Linear(b, h.get(), n, l.wv, l.bv, v.get());
      b.FullAttention(shape.Params(q.get(), k.get(), v.get(), att.get()));
      Linear(b, att.get(), n, l.wo, l.bo, h.get());
      b.Axpy(1.0f, h.get(), n * d, x.get());
      b.LayerNorm(x.get(), n, d, l.ln2_w, l.ln2_b, c_.eps, h.get());
      Linear(b, h.get(), n, l.fc1, l.fc1_b, ff.get());
      b.Gelu(ff.get(), n * c_.inter, c_.act, ff.get());
      Linear(b, ff.get(), n, l.fc2, l.fc2_b, h.get());
      b.Axpy(1.0f, h.get(), n * d, x.get());
    }
    b.LayerNorm(x.get(), n, d, w_.post_w, w_.post_b, c_.eps, x.get());
    Linear(b, x.get(), n, w_.al1, w_.al1_b, ff.get());
    b.Gelu(ff.get(), n * c_.text_hidden, kernels::GeluForm::kErf, ff.get());
    std::vector<float> out(static_cast<std::size_t>(n) * c_.text_hidden);
    Linear(b, ff.get(), n, w_.al2, w_.al2_b, out.data());
    return out;
  }

 private:
  SiglipConfig c_;
  SiglipWeights w_;
  std::vector<MappedFile> mappings_;  // the weight views point into these
  std::string fingerprint_;
  kernels::Backend* backend_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<VisionTower>> LoadDeepseekVlTower(const std::string& dir,
                                                                 const VisionJson& config,
                                                                 const std::string& config_text,
                                                                 kernels::Backend* backend,
                                                                 const VisionLoadOptions& options) {
  std::string pre_text;
  VisionJson pre;
  const std::string pre_path = dir + "/preprocessor_config.json";
  auto read = ReadSmallFile(pre_path, 1 << 20);
  if (read.ok()) {
    pre_text = *std::move(read);
    TANDEM_ASSIGN_OR_RETURN(pre, ParseJsonObject(pre_text, pre_path));
  } else if (!absl::IsNotFound(read.status())) {
    return read.status();
  }
  TANDEM_ASSIGN_OR_RETURN(
      SiglipConfig c, ParseConfig(config, pre_text.empty() ? nullptr : &pre, dir + "/config.json"));
  TANDEM_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
  // DeepseekVLForConditionalGeneration saves under "model."; DeepseekVLModel without it.
  const std::string prefix =
      ckpt.Contains("model.aligner.linear1.weight") ? "model." : std::string();
  TANDEM_ASSIGN_OR_RETURN(SiglipWeights w,
                          MapWeights(c, WeightTaker(ckpt, prefix, options.check_finite)));
  const std::string fp_texts[] = {config_text, pre_text};
  std::string fingerprint = VisionFingerprint(fp_texts, ckpt);
  return std::make_unique<DeepseekVlTower>(c, std::move(w), std::move(ckpt).ReleaseMappings(),
                                           std::move(fingerprint), backend);
}

}  // namespace tandem::model::internal
