// The fast CPU backend: wiring of the vectorised, multithreaded kernels behind Backend, and the
// choice of the kernels' ISA copy (isa.h) by CPUID. The thread pool belongs to the instance, so two
// backends never share (or contend for) threads.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernel_table.h"
#include "runtime/thread_pool.h"
#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29. Read directly: clang's __builtin_cpu_supports has no "f16c".
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

#if defined(__x86_64__)
// CPUID leaf 7: subleaf 0 EDX bit 22 AMX-BF16, bit 24 AMX-TILE; subleaf 1 EAX bit 5 AVX512-BF16.
bool CpuHasAmxBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 5)) != 0;
}

// CPUID leaf 7 subleaf 1, EAX bit 5.
bool CpuHasAvx512Bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 5)) != 0;
}

// Linux keeps the tile registers' 8 KiB of state off until a process asks
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); the grant covers all of its threads.
bool RequestTilePermission() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

// What the copy's target pragma (isa.h) lets the compiler use, checked feature by feature; GCC's
// __builtin_cpu_supports also requires the OS to save the vector registers (XCR0).
bool CpuRuns(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  // Callers may run during static initialisation (test registration), before libgcc has read the
  // CPU's features itself.
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kAvx512:
      if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))) {
        return false;
      }
      [[fallthrough]];
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
    case CpuIsa::kGeneric:
      return true;
    case CpuIsa::kAuto:
      return false;
  }
  return false;
#else
  return isa == CpuIsa::kGeneric;
#endif
}

// The copy's kernels, or null where the build did not compile it (TANDEM_KERNELS_ISAS).
const cpu::KernelTable* CompiledTable(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric: return &cpu::kGenericKernels;
#if defined(TANDEM_KERNELS_HAVE_AVX2)
    case CpuIsa::kAvx2: return &cpu::kAvx2Kernels;
#endif
#if defined(TANDEM_KERNELS_HAVE_AVX512)
    case CpuIsa::kAvx512: return &cpu::kAvx512Kernels;
#endif
    default: return nullptr;
  }
}

// "cpu-avx512", or with bf16 products "cpu-avx512-amx" / "cpu-avx512-avx512bf16".
std::string BackendName(CpuIsa isa, Bf16MatMul bf16) {
  std::string name = "cpu-";
  name += CpuIsaName(isa);
  if (bf16 != Bf16MatMul::kF32) {
    name += '-';
    name += Bf16MatMulName(bf16);
  }
  return name;
}

class FastCpuBackend final : public Backend {
 public:
  FastCpuBackend(const CpuBackendOptions& options, CpuIsa isa)
      : name_(BackendName(isa, options.bf16_matmul)),
        k_(*CompiledTable(isa)),
        pool_(options.num_threads),
        matmul_layout_(options.matmul_layout),
        bf16_(options.bf16_matmul) {}

  std::string_view name() const override { return name_; }
  WeightLayout preferred_matmul_layout(DType dtype) const override {
    if (bf16_products() && dtype == DType::kBF16) return WeightLayout::kBf16Tiles;
    return matmul_layout_;
  }

  float* AllocateFloats(std::size_t count) override {
    // 64-byte aligned so that vector loads of whole rows never split a cache line needlessly.
    return new (std::align_val_t{64}) float[count]();
  }
  void Free(float* ptr) override { ::operator delete[](ptr, std::align_val_t{64}); }

  void MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y) override {
    if (w.layout == WeightLayout::kBf16Tiles) return TilesMatMul(x, rows, w, y);
    k_.mat_mul(pool_, x, rows, w, y);
  }
  bool fuses_matmuls(DType dtype) const override {
    return bf16_products() && dtype == DType::kBF16;
  }
  void GatedMatMul(const float* x, std::int64_t rows, const WeightView& gate_up,
                   std::int64_t hidden, float* out) override {
    if (amx() && gate_up.layout == WeightLayout::kBf16Tiles) {
      return k_.amx_bf16_gated_mat_mul(pool_, x, rows, gate_up, hidden, out);
    }
    if (bf16_products() && gate_up.layout == WeightLayout::kBf16Tiles) {
      return k_.dpbf16_mat_mul_into(pool_, x, rows, gate_up, hidden, {}, {}, out);
    }
    Backend::GatedMatMul(x, rows, gate_up, hidden, out);
  }
  void StackedMatMul(const float* x, std::int64_t rows, const WeightView& stacked,
                     std::span<const std::int64_t> part_rows,
                     std::span<float* const> outputs) override {
    if (amx() && stacked.layout == WeightLayout::kBf16Tiles) {
      return k_.amx_bf16_stacked_mat_mul(pool_, x, rows, stacked, part_rows, outputs);
    }
    if (bf16_products() && stacked.layout == WeightLayout::kBf16Tiles) {
      return k_.dpbf16_mat_mul_into(pool_, x, rows, stacked, 0, part_rows, outputs, nullptr);
    }
    Backend::StackedMatMul(x, rows, stacked, part_rows, outputs);
  }
  void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
               float eps, float* y) override {
    ByRows(rows, dim, [&](std::int64_t r0, std::int64_t r1) {
      k_.rms_norm(x + r0 * dim, r1 - r0, dim, weight, eps, y + r0 * dim);
    });
  }
  void SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
               float* out) override {
    ByChunks(rows * hidden, [&](std::int64_t i0, std::int64_t i1) {
      k_.silu_mul(gate + i0, up + i0, i1 - i0, out + i0);
    });
  }
  void Axpy(float alpha, const float* x, std::int64_t n, float* y) override {
    ByChunks(n, [&](std::int64_t i0, std::int64_t i1) { k_.axpy(alpha, x + i0, i1 - i0, y + i0); });
  }
  void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
            const float* cos, const float* sin, RopeLayout layout) override {
    const std::int64_t row_floats = static_cast<std::int64_t>(n_heads) * head_stride;
    const std::int64_t half = rope_dim / 2;
    ByRows(rows, row_floats, [&](std::int64_t r0, std::int64_t r1) {
      k_.rope(x + r0 * row_floats, r1 - r0, n_heads, head_stride, rope_dim, cos + r0 * half,
              sin + r0 * half, layout);
    });
  }
  void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
             float* out) override {
    k_.embed(table, ids, rows, out);
  }
  void GqaAttention(const GqaAttentionParams& p) override { GqaAttentionBatch(std::span(&p, 1)); }
  void MlaAttention(const MlaAttentionParams& p) override {
    k_.mla_attention(pool_, std::span(&p, 1));
  }
  void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                 const WeightView& bias, float eps, float* y) override {
    ByRows(rows, dim, [&](std::int64_t r0, std::int64_t r1) {
      k_.layer_norm(x + r0 * dim, r1 - r0, dim, weight, bias, eps, y + r0 * dim);
    });
  }
  void Gelu(const float* x, std::int64_t n, GeluForm form, float* out) override {
    ByChunks(n,
             [&](std::int64_t i0, std::int64_t i1) { k_.gelu(x + i0, i1 - i0, form, out + i0); });
  }
  void AddBias(float* y, std::int64_t rows, const WeightView& bias) override {
    ByRows(rows, bias.cols, [&](std::int64_t r0, std::int64_t r1) {
      k_.add_bias(y + r0 * bias.cols, r1 - r0, bias);
    });
  }
  void FullAttention(const FullAttentionParams& p) override { k_.full_attention(pool_, p); }
  void GqaAttentionBatch(std::span<const GqaAttentionParams> batch) override {
    if (amx()) return k_.amx_gqa_attention(pool_, batch);
    if (bf16_products()) return k_.dpbf16_gqa_attention(pool_, batch);
    k_.gqa_attention(pool_, batch);
  }
  void MlaAttentionBatch(std::span<const MlaAttentionParams> batch) override {
    k_.mla_attention(pool_, batch);
  }

 private:
  // Elementwise ops split over the pool once a call has this many elements (a prefill's
  // activations: the 287M Llama's SiluMul of a 512-token prompt was 5% of the forward on one
  // thread); below it a call stays on the calling thread.
  static constexpr std::int64_t kParallelElements = 1 << 16;
  int ElementwiseTasks(std::int64_t elements, std::int64_t units) const {
    if (elements < kParallelElements || pool_.size() <= 1) return 1;
    return static_cast<int>(std::min<std::int64_t>(units, pool_.size()));
  }
  // run(r0, r1) over rows [0, rows) of row_floats elements, split over the pool by whole rows:
  // a row's result is the same in any split.
  template <typename Run>
  void ByRows(std::int64_t rows, std::int64_t row_floats, const Run& run) {
    const int tasks = ElementwiseTasks(rows * row_floats, rows);
    if (tasks <= 1) return run(0, rows);
    pool_.Run(tasks, [&](int task, int) { run(rows * task / tasks, rows * (task + 1) / tasks); });
  }
  // run(i0, i1) over elements [0, n), split by 16-float chunks: an element's operations do not
  // depend on where its call starts, as long as the vector lanes stay where they were.
  template <typename Run>
  void ByChunks(std::int64_t n, const Run& run) {
    const std::int64_t chunks = (n + 15) / 16;
    const int tasks = ElementwiseTasks(n, chunks);
    if (tasks <= 1) return run(0, n);
    pool_.Run(tasks, [&](int task, int) {
      run(chunks * task / tasks * 16, std::min(n, chunks * (task + 1) / tasks * 16));
    });
  }

  // A backend created without bf16 products never asks for bf16 tiles; one handed them anyway
  // gets the same arithmetic (x rounded to bf16, float32 sums) in plain loops, slowly and
  // without the instructions' own sum order.
  void TilesMatMul(const float* x, std::int64_t rows, const WeightView& w, float* y) {
    if (amx()) return k_.amx_bf16_mat_mul(pool_, x, rows, w, y);
    if (bf16_products()) return k_.dpbf16_mat_mul_into(pool_, x, rows, w, 0, {}, {}, y);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t o = 0; o < w.rows; ++o) {
        float sum = 0.0f;
        for (std::int64_t c = 0; c < w.cols; ++c) {
          sum += Bf16ToF32(F32ToBf16(x[r * w.cols + c])) * w.At(o, c);
        }
        y[r * w.rows + o] = sum;
      }
    }
  }

  const std::string name_;
  const cpu::KernelTable& k_;
  cpu::ThreadPool pool_;
  WeightLayout matmul_layout_;
  const Bf16MatMul bf16_;
  // kAmx: bf16 products on AMX tiles; kAvx512Bf16: with VDPBF16PS.
  bool amx() const { return bf16_ == Bf16MatMul::kAmx; }
  // kAmx or kAvx512Bf16: bf16 weights as tiles, their MatMuls fused, GQA attention in bf16.
  bool bf16_products() const { return bf16_ != Bf16MatMul::kF32; }
};

}  // namespace

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kGeneric: return "generic";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kAuto, CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

bool IsCpuIsaAvailable(CpuIsa isa) {
  return isa == CpuIsa::kAuto || (CompiledTable(isa) != nullptr && CpuRuns(isa));
}

std::vector<CpuIsa> AvailableCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (IsCpuIsaAvailable(isa)) out.push_back(isa);
  }
  return out;
}

std::string AvailableCpuIsaNames() {
  std::string names;
  for (CpuIsa isa : AvailableCpuIsas()) {
    if (!names.empty()) names += ", ";
    names += CpuIsaName(isa);
  }
  return names;
}

std::optional<CpuIsa> ParseAvailableCpuIsa(std::string_view name, std::string* error) {
  const std::optional<CpuIsa> isa = ParseCpuIsa(name);
  if (isa && IsCpuIsaAvailable(*isa)) return isa;
  *error = std::string(name) + ": this binary and CPU run auto, " + AvailableCpuIsaNames();
  return std::nullopt;
}

CpuIsa ResolveCpuIsa(CpuIsa requested) {
  if (requested == CpuIsa::kAuto) return AvailableCpuIsas().back();
  if (IsCpuIsaAvailable(requested)) return requested;
  throw std::invalid_argument("CPU kernels for " + std::string(CpuIsaName(requested)) +
                              " are not available here (this binary and CPU run: " +
                              AvailableCpuIsaNames() + ")");
}

std::string_view Bf16MatMulName(Bf16MatMul mode) {
  switch (mode) {
    case Bf16MatMul::kAmx:
      return "amx";
    case Bf16MatMul::kAvx512Bf16:
      return "avx512bf16";
    case Bf16MatMul::kF32:
      break;
  }
  return "f32";
}

bool IsAmxBf16Available() {
#if defined(__x86_64__) && defined(TANDEM_KERNELS_HAVE_AVX512)
  return CpuRuns(CpuIsa::kAvx512) && CpuHasAmxBf16() && RequestTilePermission();
#else
  return false;
#endif
}

bool IsAvx512Bf16Available() {
#if defined(__x86_64__) && defined(TANDEM_KERNELS_HAVE_AVX512)
  return CpuRuns(CpuIsa::kAvx512) && CpuHasAvx512Bf16();
#else
  return false;
#endif
}

namespace {

// Why a backend of `isa` (an available one, or kAuto) cannot run `mode`, as "amx ..." or
// "avx512bf16 ..."; empty if it can.
std::string Bf16MatMulRefusal(Bf16MatMul mode, CpuIsa isa) {
  if (mode == Bf16MatMul::kF32) return "";
  if (mode == Bf16MatMul::kAmx && !IsAmxBf16Available()) {
    return "amx: needs a CPU with AMX-TILE, AMX-BF16 and AVX512-BF16 (Intel Xeon from Sapphire "
           "Rapids on), AVX-512 kernels in this binary and the OS's permission for the tile "
           "registers; use f32";
  }
  if (mode == Bf16MatMul::kAvx512Bf16 && !IsAvx512Bf16Available()) {
    return "avx512bf16: needs a CPU with AVX512-BF16 (AMD Zen 4 on, Intel Cooper Lake and "
           "Sapphire Rapids on) and AVX-512 kernels in this binary; use f32";
  }
  if (ResolveCpuIsa(isa) != CpuIsa::kAvx512) {
    return std::string(Bf16MatMulName(mode)) + " runs beside the avx512 kernels, not " +
           std::string(CpuIsaName(isa));
  }
  return "";
}

}  // namespace

std::optional<Bf16MatMul> ParseAvailableBf16MatMul(std::string_view name, CpuIsa isa,
                                                   std::string* error) {
  for (Bf16MatMul mode : {Bf16MatMul::kF32, Bf16MatMul::kAmx, Bf16MatMul::kAvx512Bf16}) {
    if (name != Bf16MatMulName(mode)) continue;
    *error = Bf16MatMulRefusal(mode, isa);
    if (error->empty()) return mode;
    return std::nullopt;
  }
  *error = std::string(name) + ": one of auto, f32, amx, avx512bf16";
  return std::nullopt;
}

Bf16MatMul AutoBf16MatMul(CpuIsa isa, DType weights) {
  if (weights != DType::kBF16) return Bf16MatMul::kF32;
  if (Bf16MatMulRefusal(Bf16MatMul::kAmx, isa).empty()) return Bf16MatMul::kAmx;
  if (Bf16MatMulRefusal(Bf16MatMul::kAvx512Bf16, isa).empty()) {
    const std::optional<Bf16DotRates>& rates = Bf16DotRatesOfThisCpu();
    if (rates && Bf16DotsPayOff(*rates)) return Bf16MatMul::kAvx512Bf16;
  }
  return Bf16MatMul::kF32;
}

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  const CpuIsa isa = ResolveCpuIsa(options.isa);
  if (const std::string refusal = Bf16MatMulRefusal(options.bf16_matmul, isa); !refusal.empty()) {
    throw std::invalid_argument("bf16_matmul " + refusal);
  }
  return std::make_unique<FastCpuBackend>(options, isa);
}

}  // namespace tandem::kernels
