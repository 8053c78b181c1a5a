#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/kernels/attention_params.h"
#include "tandem/kernels/dtype.h"

namespace tandem::kernels {

// Layout of the rotary pairs: llama2.c and DeepSeek's own inference code rotate adjacent pairs
// (2i, 2i+1); Hugging Face rotates (i, i + dim/2).
enum class RopeLayout : std::uint8_t { kInterleaved, kHalfSplit };

// GELU's two spellings: the exact erf form (torch nn.GELU()) and the tanh approximation
// (nn.GELU(approximate="tanh"), transformers' "gelu_pytorch_tanh", SigLIP's activation).
enum class GeluForm : std::uint8_t { kErf, kTanh };

// The compute backend: every op the model forward needs, over memory in the backend's own space
// (host memory for CPU, device memory for CUDA). Models are written once against this interface;
// the CPU path is a peer backend, not a special case.
//
// Batch invariance contract: every op computes each output row from its own input row with a
// reduction order that does not depend on how many rows are in the call, so a sequence gets
// bit-identical results alone or inside any batch.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Memory in this backend's space. Returned pointers stay valid until Free.
  virtual float* AllocateFloats(std::size_t count) = 0;
  virtual void Free(float* ptr) = 0;

  // y[r][o] = sum_i x[r][i] * w[o][i]   (x: [rows][w.cols], y: [rows][w.rows])
  virtual void MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y) = 0;
  // The layout MatMul runs fastest on for weights of `dtype`. Models pack their matrices once at
  // load (PanelWeight::Pack) when this is a packed layout; a backend that prefers kRows is never
  // handed packed weights. The CPU backends take every layout.
  virtual WeightLayout preferred_matmul_layout(DType dtype) const {
    (void)dtype;
    return WeightLayout::kRows;
  }
  // out[r][i] = silu(x[r] . gate[i]) * (x[r] . up[i]) for i < hidden (out: [rows][hidden]): a
  // SwiGLU feed-forward's first half in one call, from `gate_up` = PanelWeight::PackGated(gate, up)
  // (bf16 tiles whose 16-row groups alternate gate and up). This default runs MatMul over the pair
  // and SiluMul over each group, so a backend that fuses the two must give the same bits.
  //
  // fuses_matmuls(dtype): whether GatedMatMul and StackedMatMul run fused for weights of `dtype`;
  // models pack gated pairs and stacks only where it says so.
  virtual bool fuses_matmuls(DType dtype) const {
    (void)dtype;
    return false;
  }
  virtual void GatedMatMul(const float* x, std::int64_t rows, const WeightView& gate_up,
                           std::int64_t hidden, float* out) {
    const std::int64_t width = gate_up.rows;
    float* both = AllocateFloats(static_cast<std::size_t>(rows * width));
    MatMul(x, rows, gate_up, both);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < hidden; i += kTileGroupRows) {
        const float* group = both + r * width + 2 * i;
        SiluMul(group, group + kTileGroupRows, 1, std::min(kTileGroupRows, hidden - i),
                out + r * hidden + i);
      }
    }
    Free(both);
  }
  // outputs[i][r][o] = x[r] . part_i[o] for o < part_rows[i]: several matrices with the same input
  // (a layer's q, k and v projections) in one call, from `stacked` = PanelWeight::PackStacked
  // (the parts' 16-row groups one after the other), so that x is prepared once. Models pack and
  // call it only where fuses_matmuls(dtype) says so. This default runs MatMul over the stack
  // and copies each part's columns out: a backend that writes the parts directly must give the
  // same bits.
  virtual void StackedMatMul(const float* x, std::int64_t rows, const WeightView& stacked,
                             std::span<const std::int64_t> part_rows,
                             std::span<float* const> outputs) {
    const std::int64_t width = stacked.rows;
    float* all = AllocateFloats(static_cast<std::size_t>(rows * width));
    MatMul(x, rows, stacked, all);
    std::int64_t first = 0;
    for (std::size_t i = 0; i < part_rows.size(); ++i) {
      for (std::int64_t r = 0; r < rows; ++r) {
        std::copy_n(all + r * width + first, part_rows[i], outputs[i] + r * part_rows[i]);
      }
      first += (part_rows[i] + kTileGroupRows - 1) / kTileGroupRows * kTileGroupRows;
    }
    Free(all);
  }
  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight   (x and y may alias)
  virtual void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                       float eps, float* y) = 0;
  // out[r][i] = silu(gate[r][i]) * up[r][i], all [rows][hidden].
  virtual void SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
                       float* out) = 0;
  // y[i] += alpha * x[i]
  virtual void Axpy(float alpha, const float* x, std::int64_t n, float* y) = 0;
  // Rotates the first rope_dim dims of each head in place. x: [rows][n_heads][head_stride];
  // cos/sin: [rows][rope_dim/2] (the model precomputes them per position, which covers every
  // scaling variant).
  virtual void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
                    const float* cos, const float* sin, RopeLayout layout) = 0;
  // out[r] = table[ids[r]]  (table: [vocab][dim])
  virtual void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
                     float* out) = 0;
  virtual void GqaAttention(const GqaAttentionParams& p) = 0;

  // Encoder ops (vision towers).
  // y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias, var the biased variance as torch's
  // LayerNorm (x and y may alias; bias may be empty).
  virtual void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim,
                         const WeightView& weight, const WeightView& bias, float eps, float* y) = 0;
  // out[i] = gelu(x[i]) in the given form (x and out may alias).
  virtual void Gelu(const float* x, std::int64_t n, GeluForm form, float* out) = 0;
  // y[r][i] += bias[i] for every row; y: [rows][bias.cols].
  virtual void AddBias(float* y, std::int64_t rows, const WeightView& bias) = 0;
  virtual void FullAttention(const FullAttentionParams& p) = 0;
  virtual void MlaAttention(const MlaAttentionParams& p) = 0;
  // Attention for several sequences of one layer at once (e.g. a decode batch, one token each):
  // the same results as calling the single-sequence op on each, but a backend can spread all of
  // their work over its threads in one go rather than one small call at a time.
  virtual void GqaAttentionBatch(std::span<const GqaAttentionParams> batch) {
    for (const GqaAttentionParams& p : batch) GqaAttention(p);
  }
  virtual void MlaAttentionBatch(std::span<const MlaAttentionParams> batch) {
    for (const MlaAttentionParams& p : batch) MlaAttention(p);
  }
};

// The instruction sets the fast CPU backend has kernels for. One binary carries a copy of the
// kernels per ISA and picks one at run time. AVX2 means AVX2 + FMA + F16C; AVX-512 means F, BW, VL
// and DQ on top. The AVX2 and AVX-512 copies give bit-identical results (the same operations in the
// same order, held in ymm pairs or zmm); the generic copy rounds products before adding them (no
// FMA), so its bits differ from theirs in the last places.
enum class CpuIsa : std::uint8_t { kAuto, kGeneric, kAvx2, kAvx512 };

std::string_view CpuIsaName(CpuIsa isa);  // "auto", "generic", "avx2", "avx512"
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);
// The ISAs this binary has kernels for and this CPU (and OS) can run, best last; never empty.
std::vector<CpuIsa> AvailableCpuIsas();
// Whether CreateCpuBackend accepts `isa` here (kAuto always).
bool IsCpuIsaAvailable(CpuIsa isa);
// AvailableCpuIsas() for messages: "generic, avx2".
std::string AvailableCpuIsaNames();
// A --cpu-isa value: the ISA when `name` is one that is available here; otherwise nullopt and
// *error says why, e.g. "avx1024: this binary and CPU run auto, generic, avx2".
std::optional<CpuIsa> ParseAvailableCpuIsa(std::string_view name, std::string* error);

// How the fast CPU backend's matrix products treat bf16.
//  kF32: activations stay float32 and every product is exact (the backend's default and the
//    services' for checkpoints that are not bf16, see AutoBf16MatMul; the same arithmetic as
//    the other dtypes).
//  kAmx: the arithmetic of oneDNN and torch for bf16 models, on AMX tiles: the MatMul of bf16
//    weights rounds its activations to bf16 (nearest even) and sums the products in float32; GQA
//    attention rounds queries, keys, softmax weights and values to bf16 for its two products (the
//    softmax itself stays float32). Several times kF32's prefill throughput
//    (docs/performance.md, "AMX bf16 products"); results differ from kF32's by bf16 rounding;
//    batch invariant like every op. Needs AMX-TILE, AMX-BF16 and AVX512-BF16 (Intel Xeon from
//    Sapphire Rapids on) and the AVX-512 kernels. bf16 weights are packed into
//    WeightLayout::kBf16Tiles; other weights keep kF32's MatMul (attention is bf16 whatever the
//    weights), so it is meant for bf16 checkpoints; MLA attention stays float32.
//  kAvx512Bf16: kAmx's arithmetic (operands rounded to bf16, float32 sums of the exact products:
//    the MatMul of bf16 weights, gate/up pairs and q/k/v stacks fused alike, and GQA attention's
//    two products) with AVX512-BF16's dot-product instruction, for CPUs that have it but no AMX
//    (AMD Zen 4 and later, Intel Cooper Lake). About twice kF32's prefill where float32 FMAs and
//    the dot products issue at the same rate (AMD Zen 4/5; docs/performance.md, "AVX512-BF16
//    products"), 0.6x where the dot product issues at half the FMA's rate (Intel Sapphire and
//    Emerald Rapids with AMX off, "Which bf16 products auto picks"); its bits differ from kAmx's
//    and kF32's; batch invariant like every op. Needs AVX512-BF16 and the AVX-512 kernels.
enum class Bf16MatMul : std::uint8_t { kF32, kAmx, kAvx512Bf16 };

std::string_view Bf16MatMulName(Bf16MatMul mode);  // "f32", "amx", "avx512bf16"
// A --bf16-matmul value for a backend of `isa` (a --cpu-isa value, kAuto included); nullopt for an
// unknown name, or for "amx" / "avx512bf16" where this binary and CPU (and OS) cannot run it or
// `isa` resolves to another copy than avx512, with *error saying which. "auto" needs the
// checkpoint's dtype, so callers resolve it with AutoBf16MatMul before calling this.
std::optional<Bf16MatMul> ParseAvailableBf16MatMul(std::string_view name, CpuIsa isa,
                                                   std::string* error);
// The --bf16-matmul flag's help, for every binary that takes it.
inline constexpr std::string_view kBf16MatMulFlagHelp =
    "bf16 products: auto (the default: amx, else avx512bf16 where this core runs its dot products "
    "faster than float32 FMAs, where the checkpoint's matrices are bf16 and the CPU has the "
    "instructions; f32 otherwise), f32 (activations stay float32, exact "
    "products), amx (operands rounded to bf16 and multiplied on AMX tiles, bf16 weights' MatMul "
    "and attention, as torch does: several times the prefill throughput, last bits differ; needs "
    "AMX-BF16) or avx512bf16 (the same arithmetic with AVX512-BF16's dot products: about twice "
    "the prefill throughput on AMD Zen 4/5, 0.6x on Intel cores without AMX; needs AVX512-BF16)";

// What `--bf16-matmul auto` (the services' default) runs on a backend of `isa` for a checkpoint
// whose matrices are mostly `weights`: for bf16 the arithmetic the checkpoint was trained and is
// served with elsewhere (torch, oneDNN, vLLM and llama.cpp all round activations to bf16 for a
// bf16 model), on AMX tiles where available, else with AVX512-BF16's dot products where this core
// runs them fast enough to pay for rounding the activations (Bf16DotsPayOff of
// Bf16DotRatesOfThisCpu()); kF32 for other dtypes, where this CPU, binary or `isa` has neither, or
// where the dot products are slow (Intel's cores without AMX: half the FMA's flops).
Bf16MatMul AutoBf16MatMul(CpuIsa isa, DType weights);

// One core's throughput of AVX512-BF16's VDPBF16PS and of the float32 FMA on 512-bit registers
// (register operands, GFLOP/s: a dot product counts 64 flops, an FMA 32). AMD Zen 4/5 run the
// dot product at about twice the FMA's flops, Intel Sapphire and Emerald Rapids at about half.
struct Bf16DotRates {
  double dot_gflops = 0;
  double fma_gflops = 0;
};
// Measures them on the calling thread (a fraction of a millisecond: each kind's fastest of 16
// alternating rounds); nullopt where the CPU or this binary has no AVX512-BF16.
std::optional<Bf16DotRates> MeasureBf16DotRates();
// The dot products' flops over the FMA's that kAvx512Bf16 needs to be worth it: its prefill also
// rounds and pairs the activations, and ran at 0.6x kF32's at a ratio of 0.5 and 1.8-2x at 2-4
// (docs/performance.md, "Which bf16 products auto picks").
inline constexpr double kBf16DotMinSpeedup = 1.3;
bool Bf16DotsPayOff(const Bf16DotRates& rates);
// MeasureBf16DotRates() of the first call, kept for the process, so that every backend the
// process creates picks the same arithmetic.
const std::optional<Bf16DotRates>& Bf16DotRatesOfThisCpu();
// Whether the CPU has AMX-TILE, AMX-BF16 and AVX512-BF16, the build has the AVX-512 kernels, and
// the OS grants this process the tile registers (asked for here, once; the grant is per process).
bool IsAmxBf16Available();
// Whether the CPU has AVX512-BF16 (with the AVX-512 kernels' features) and the build has them.
bool IsAvx512Bf16Available();

struct CpuBackendOptions {
  int num_threads = 0;  // 0: hardware concurrency
  // kAuto: the best of AvailableCpuIsas(). Another value must be one of them; CreateCpuBackend
  // throws std::invalid_argument otherwise (a startup error: callers validate flags first).
  CpuIsa isa = CpuIsa::kAuto;
  // What the backend asks models for (Backend::preferred_matmul_layout): panels, whose MatMul
  // order (one FMA per column) gives register tiles of rows x outputs, about 1.4-1.8x the
  // row-major prefill (docs/performance.md, "Panel MatMul"); kRows keeps the 16-lane dot order.
  // Results differ in the last bits between the two, so every worker of a cluster uses one.
  WeightLayout matmul_layout = WeightLayout::kPanels;
  // kAmx needs IsAmxBf16Available(), kAvx512Bf16 IsAvx512Bf16Available(), and both isa kAuto or
  // kAvx512; CreateCpuBackend throws std::invalid_argument otherwise.
  Bf16MatMul bf16_matmul = Bf16MatMul::kF32;
};

// The ISA CreateCpuBackend(options) runs: options.isa, or the best available for kAuto. Throws
// std::invalid_argument for an ISA that is not available.
CpuIsa ResolveCpuIsa(CpuIsa requested);

// The fast CPU backend: vectorised, multithreaded over output rows / attention (token, head) pairs.
// Its name() is "cpu-" and the ISA it runs, ResolveCpuIsa(options.isa): "cpu-avx512".
std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options);

// Single-threaded scalar loops that define every op's semantics: the oracle the fast backends are
// tested against, and the baseline of the benchmarks. Not for serving.
std::unique_ptr<Backend> CreateReferenceCpuBackend();

}  // namespace tandem::kernels
