// DeepSeek V4.1's native-resolution vision tower. No V4.1 vision code is published; this follows
// tools/fixtures/v41_vision_reference.py, written from DeepSeek-VL2's published projector
// (downsample_mlp_gelu: zero-pad the grid bottom/right, F.unfold kernel = stride = 3, Linear ->
// GELU -> Linear) and image_newline, with the ViT the V4.1 description names: 14-pixel patches at
// native resolution, 2D RoPE (Qwen2-VL's split: row frequencies, then column frequencies,
// rotate_half pairs), RMSNorm, SwiGLU; begin/end embeddings around the rows. docs/vision.md lists
// the tensor names and every choice the published code did not settle.
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"
#include "vision/vision_towers.h"

namespace tandem::model::internal {
namespace {

struct V41Config {
  int hidden = 0, inter = 0, layers = 0, heads = 0, patch = 0, merge = 0, proj_hidden = 0;
  int text_hidden = 0;
  float eps = 1e-6f, rope_theta = 10000.0f;
  PixelNorm norm;
  int head_dim() const { return hidden / heads; }
  int cell() const { return patch * merge; }  // pixels a side of one output token
};

struct V41Block {
  kernels::WeightView norm1, wqkv, bqkv, wo, bo, norm2, w1, w2, w3;
};

struct V41Weights {
  kernels::WeightView patch_w, patch_b;
  std::vector<V41Block> blocks;
  kernels::WeightView norm, p0, p0_b, p2, p2_b, begin, newline, end;
};

absl::StatusOr<V41Config> ParseConfig(const VisionJson& root, const std::string& src) {
  const auto vc = root.find("vision_config");
  const auto pc = root.find("projector_config");
  if (vc == root.end() || !vc->is_object() || pc == root.end() || !pc->is_object()) {
    return absl::InvalidArgumentError(src + ": needs vision_config and projector_config objects");
  }
  const std::string vsrc = src + " vision_config";
  V41Config c;
  TANDEM_ASSIGN_OR_RETURN(c.hidden, JsonInt(*vc, "hidden_size", 1, 16384, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.inter, JsonInt(*vc, "intermediate_size", 1, 65536, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.layers, JsonInt(*vc, "num_hidden_layers", 1, 256, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.heads, JsonInt(*vc, "num_attention_heads", 1, 1024, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.patch, JsonInt(*vc, "patch_size", 1, 256, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.merge, JsonInt(*vc, "spatial_merge_size", 1, 16, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.eps, JsonFloat(*vc, "rms_norm_eps", 0.0f, 1.0f, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.rope_theta, JsonFloat(*vc, "rope_theta", 1.0f, 1e9f, vsrc));
  TANDEM_ASSIGN_OR_RETURN(c.proj_hidden,
                          JsonInt(*pc, "hidden_size", 1, 65536, src + " projector_config"));
  TANDEM_ASSIGN_OR_RETURN(c.text_hidden, JsonInt(root, "text_hidden_size", 1, 65536, src));
  TANDEM_ASSIGN_OR_RETURN(c.norm.mean, JsonFloat3(root, "image_mean", -10.0f, 10.0f, src));
  TANDEM_ASSIGN_OR_RETURN(c.norm.std, JsonFloat3(root, "image_std", 1e-6f, 100.0f, src));
  if (c.hidden % c.heads != 0 || c.head_dim() % 4 != 0) {
    // 2D RoPE splits each head's rotary half into a row half and a column half.
    return absl::InvalidArgumentError(
        vsrc + ": hidden_size / num_attention_heads must be a multiple of 4 (2D RoPE)");
  }
  return c;
}

absl::StatusOr<V41Weights> MapWeights(const V41Config& c, const WeightTaker& t) {
  const std::int64_t d = c.hidden, m2 = static_cast<std::int64_t>(c.merge) * c.merge;
  V41Weights w;
  TANDEM_ASSIGN_OR_RETURN(w.patch_w, t.PatchConv("vision.patch_embed.weight", d, c.patch));
  TANDEM_ASSIGN_OR_RETURN(w.patch_b, t.Vector("vision.patch_embed.bias", d));
  w.blocks.resize(c.layers);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = absl::StrCat("vision.blocks.", i, ".");
    V41Block& b = w.blocks[i];
    TANDEM_ASSIGN_OR_RETURN(b.norm1, t.Vector(p + "norm1.weight", d));
    TANDEM_ASSIGN_OR_RETURN(b.wqkv, t.Matrix(p + "attn.qkv.weight", 3 * d, d));
    TANDEM_ASSIGN_OR_RETURN(b.bqkv, t.Vector(p + "attn.qkv.bias", 3 * d));
    TANDEM_ASSIGN_OR_RETURN(b.wo, t.Matrix(p + "attn.proj.weight", d, d));
    TANDEM_ASSIGN_OR_RETURN(b.bo, t.Vector(p + "attn.proj.bias", d));
    TANDEM_ASSIGN_OR_RETURN(b.norm2, t.Vector(p + "norm2.weight", d));
    TANDEM_ASSIGN_OR_RETURN(b.w1, t.Matrix(p + "mlp.w1.weight", c.inter, d));
    TANDEM_ASSIGN_OR_RETURN(b.w2, t.Matrix(p + "mlp.w2.weight", d, c.inter));
    TANDEM_ASSIGN_OR_RETURN(b.w3, t.Matrix(p + "mlp.w3.weight", c.inter, d));
  }
  TANDEM_ASSIGN_OR_RETURN(w.norm, t.Vector("vision.norm.weight", d));
  TANDEM_ASSIGN_OR_RETURN(w.p0, t.Matrix("projector.layers.0.weight", c.proj_hidden, d * m2));
  TANDEM_ASSIGN_OR_RETURN(w.p0_b, t.Vector("projector.layers.0.bias", c.proj_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.p2,
                          t.Matrix("projector.layers.2.weight", c.text_hidden, c.proj_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.p2_b, t.Vector("projector.layers.2.bias", c.text_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.begin, t.Vector("image_begin", c.text_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.newline, t.Vector("image_newline", c.text_hidden));
  TANDEM_ASSIGN_OR_RETURN(w.end, t.Vector("image_end", c.text_hidden));
  return w;
}

// cos/sin [rows * cols][head_dim / 2] for patches in row-major order: entry j < head_dim / 4 is
// row * f_j, the rest col * f_(j - head_dim / 4), f_j = theta^(-4j / head_dim); computed in double
// as the reference does, then rounded once.
void Rope2d(int rows, int cols, int head_dim, double theta, float* cos_out, float* sin_out) {
  const int quarter = head_dim / 4, half = head_dim / 2;
  std::vector<double> inv_freq(quarter);
  for (int j = 0; j < quarter; ++j) {
    inv_freq[j] = 1.0 / std::pow(theta, (2.0 * j) / static_cast<double>(half));
  }
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::int64_t base = (static_cast<std::int64_t>(r) * cols + c) * half;
      for (int j = 0; j < quarter; ++j) {
        const double a = r * inv_freq[j], b = c * inv_freq[j];
        cos_out[base + j] = static_cast<float>(std::cos(a));
        sin_out[base + j] = static_cast<float>(std::sin(a));
        cos_out[base + quarter + j] = static_cast<float>(std::cos(b));
        sin_out[base + quarter + j] = static_cast<float>(std::sin(b));
      }
    }
  }
}

float RowValue(const kernels::WeightView& v, int i) { return v.At(0, i); }

class V41Tower final : public VisionTower {
 public:
  V41Tower(V41Config c, V41Weights w, std::vector<MappedFile> mappings, std::string fingerprint,
           kernels::Backend* backend)
      : c_(c),
        w_(std::move(w)),
        mappings_(std::move(mappings)),
        fingerprint_(std::move(fingerprint)),
        backend_(backend) {}

  std::string_view kind() const override { return "deepseek_v41_vision"; }
  int hidden_size() const override { return c_.text_hidden; }
  const std::string& fingerprint() const override { return fingerprint_; }

  absl::StatusOr<int> OutputRows(int width, int height) const override {
    TANDEM_RETURN_IF_ERROR(ValidateSize(width, height, kMaxVisionSide, kMaxVisionPixels));
    if (width % c_.patch != 0 || height % c_.patch != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("image size ", width, "x", height, " is not a multiple of the ", c_.patch,
                       "-pixel patch (the preprocessor resizes to whole patches)"));
    }
    const int cell = c_.cell();
    const int nh = (height + cell - 1) / cell, nw = (width + cell - 1) / cell;
    return nh * (nw + 1) + 2;  // begin, each merged row and its newline, end
  }

  absl::StatusOr<std::vector<float>> Encode(int width, int height,
                                            absl::Span<const std::uint8_t> rgb) const override {
    TANDEM_RETURN_IF_ERROR(ValidateRgb(width, height, rgb, kMaxVisionSide, kMaxVisionPixels));
    TANDEM_ASSIGN_OR_RETURN(const int out_rows, OutputRows(width, height));
    kernels::Backend& b = *backend_;
    const int prow = height / c_.patch, pcol = width / c_.patch;
    const std::int64_t n = static_cast<std::int64_t>(prow) * pcol, d = c_.hidden;
    const int hd = c_.head_dim();
    BackendFloats patches(backend_, n * 3 * c_.patch * c_.patch), x(backend_, n * d),
        h(backend_, n * d), q(backend_, n * d), k(backend_, n * d), v(backend_, n * d),
        att(backend_, n * d), gate(backend_, n * c_.inter), up(backend_, n * c_.inter),
        cos(backend_, n * hd / 2), sin(backend_, n * hd / 2);
    ExtractPatches(rgb.data(), width, height, c_.patch, c_.norm, patches.get());
    Linear(b, patches.get(), n, w_.patch_w, w_.patch_b, x.get());
    Rope2d(prow, pcol, hd, c_.rope_theta, cos.get(), sin.get());
    const FullAttentionShape shape{n, c_.heads, hd};
    for (const V41Block& l : w_.blocks) {
      b.RmsNorm(x.get(), n, d, l.norm1, c_.eps, h.get());
      Linear(b, h.get(), n, l.wqkv.RowSlice(0, d), BiasSlice(l.bqkv, 0, d), q.get());
      Linear(b, h.get(), n, l.wqkv.RowSlice(d, d), BiasSlice(l.bqkv, d, d), k.get());
      Linear(b, h.get(), n, l.wqkv.RowSlice(2 * d, d), BiasSlice(l.bqkv, 2 * d, d), v.get());
      b.Rope(q.get(), n, c_.heads, hd, hd, cos.get(), sin.get(), kernels::RopeLayout::kHalfSplit);
      b.Rope(k.get(), n, c_.heads, hd, hd, cos.get(), sin.get(), kernels::RopeLayout::kHalfSplit);
      b.FullAttention(shape.Params(q.get(), k.get(), v.get(), att.get()));
      Linear(b, att.get(), n, l.wo, l.bo, h.get());
      b.Axpy(1.0f, h.get(), n * d, x.get());
      b.RmsNorm(x.get(), n, d, l.norm2, c_.eps, h.get());
      b.MatMul(h.get(), n, l.w1, gate.get());
      b.MatMul(h.get(), n, l.w3, up.get());
      b.SiluMul(gate.get(), up.get(), n, c_.inter, gate.get());
      b.MatMul(gate.get(), n, l.w2, h.get());
      b.Axpy(1.0f, h.get(), n * d, x.get());
    }
    b.RmsNorm(x.get(), n, d, w_.norm, c_.eps, x.get());
    return Project(x.get(), prow, pcol, out_rows);
  }

 private:
  static kernels::WeightView BiasSlice(const kernels::WeightView& bias, std::int64_t first,
                                       std::int64_t count) {
    kernels::WeightView v = bias;
    v.data = static_cast<const std::uint8_t*>(bias.data) + first * kernels::DTypeSize(bias.dtype);
    v.cols = count;
    return v;
  }

  // The 3x3 unfold (zero padding past the last patch row/column, F.unfold's channel-major
  // feature order: channel, then kernel row, then kernel column), the projector MLP, and the
  // begin / newline / end rows.
  std::vector<float> Project(const float* grid, int prow, int pcol, int out_rows) const {
    kernels::Backend& b = *backend_;
    const int m = c_.merge, d = c_.hidden, t = c_.text_hidden;
    const int nh = (prow + m - 1) / m, nw = (pcol + m - 1) / m;
    const std::int64_t cells = static_cast<std::int64_t>(nh) * nw;
    const std::int64_t feat = static_cast<std::int64_t>(d) * m * m;
    BackendFloats unfolded(backend_, cells * feat), hidden(backend_, cells * c_.proj_hidden),
        merged(backend_, cells * t);
    for (int i = 0; i < nh; ++i) {
      for (int j = 0; j < nw; ++j) {
        float* dst = unfolded.get() + (static_cast<std::int64_t>(i) * nw + j) * feat;
        for (int ki = 0; ki < m; ++ki) {
          for (int kj = 0; kj < m; ++kj) {
            const int r = i * m + ki, c = j * m + kj;
            const float* src = r < prow && c < pcol
                                   ? grid + (static_cast<std::int64_t>(r) * pcol + c) * d
                                   : nullptr;
            for (int ch = 0; ch < d; ++ch) dst[ch * m * m + ki * m + kj] = src ? src[ch] : 0.0f;
          }
        }
      }
    }
    Linear(b, unfolded.get(), cells, w_.p0, w_.p0_b, hidden.get());
    b.Gelu(hidden.get(), cells * c_.proj_hidden, kernels::GeluForm::kErf, hidden.get());
    Linear(b, hidden.get(), cells, w_.p2, w_.p2_b, merged.get());

    std::vector<float> out(static_cast<std::size_t>(out_rows) * t);
    float* o = out.data();
    auto put = [&](const kernels::WeightView& row) {
      for (int i = 0; i < t; ++i) o[i] = RowValue(row, i);
      o += t;
    };
    put(w_.begin);
    for (int i = 0; i < nh; ++i) {
      const float* src = merged.get() + static_cast<std::int64_t>(i) * nw * t;
      std::copy(src, src + static_cast<std::int64_t>(nw) * t, o);
      o += static_cast<std::int64_t>(nw) * t;
      put(w_.newline);
    }
    put(w_.end);
    return out;
  }

  V41Config c_;
  V41Weights w_;
  std::vector<MappedFile> mappings_;  // the weight views point into these
  std::string fingerprint_;
  kernels::Backend* backend_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<VisionTower>> LoadV41VisionTower(const std::string& dir,
                                                                const VisionJson& config,
                                                                const std::string& config_text,
                                                                kernels::Backend* backend,
                                                                const VisionLoadOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(V41Config c, ParseConfig(config, dir + "/config.json"));
  TANDEM_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
  TANDEM_ASSIGN_OR_RETURN(V41Weights w, MapWeights(c, WeightTaker(ckpt, "", options.check_finite)));
  const std::string fp_texts[] = {config_text};
  std::string fingerprint = VisionFingerprint(fp_texts, ckpt);
  return std::make_unique<V41Tower>(c, std::move(w), std::move(ckpt).ReleaseMappings(),
                                    std::move(fingerprint), backend);
}

}  // namespace tandem::model::internal
