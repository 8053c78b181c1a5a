// The fast CPU backend: wiring of the vectorised, multithreaded kernels behind Backend. The thread
// pool belongs to the instance, so two backends never share (or contend for) threads.
#include <memory>

#include "attention.h"
#include "elementwise.h"
#include "encoder_ops.h"
#include "matmul.h"
#include "tandem/kernels/backend.h"
#include "thread_pool.h"

namespace tandem::kernels {
namespace {

class FastCpuBackend final : public Backend {
 public:
  explicit FastCpuBackend(const CpuBackendOptions& options) : pool_(options.num_threads) {}

  std::string_view name() const override { return "cpu"; }

  float* AllocateFloats(std::size_t count) override {
    // 64-byte aligned so that vector loads of whole rows never split a cache line needlessly.
    return new (std::align_val_t{64}) float[count]();
  }
  void Free(float* ptr) override { ::operator delete[](ptr, std::align_val_t{64}); }

  void MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y) override {
    cpu::MatMul(pool_, x, rows, w, y);
  }
  void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
               float eps, float* y) override {
    cpu::RmsNorm(x, rows, dim, weight, eps, y);
  }
  void SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
               float* out) override {
    cpu::SiluMul(gate, up, rows * hidden, out);
  }
  void Axpy(float alpha, const float* x, std::int64_t n, float* y) override {
    cpu::Axpy(alpha, x, n, y);
  }
  void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
            const float* cos, const float* sin, RopeLayout layout) override {
    cpu::Rope(x, rows, n_heads, head_stride, rope_dim, cos, sin, layout);
  }
  void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
             float* out) override {
    cpu::Embed(table, ids, rows, out);
  }
  void GqaAttention(const GqaAttentionParams& p) override {
    cpu::GqaAttention(pool_, std::span(&p, 1));
  }
  void MlaAttention(const MlaAttentionParams& p) override {
    cpu::MlaAttention(pool_, std::span(&p, 1));
  }
  void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                 const WeightView& bias, float eps, float* y) override {
    cpu::LayerNorm(x, rows, dim, weight, bias, eps, y);
  }
  void Gelu(const float* x, std::int64_t n, GeluForm form, float* out) override {
    cpu::Gelu(x, n, form, out);
  }
  void AddBias(float* y, std::int64_t rows, const WeightView& bias) override {
    cpu::AddBias(y, rows, bias);
  }
  void FullAttention(const FullAttentionParams& p) override { cpu::FullAttention(pool_, p); }
  void GqaAttentionBatch(std::span<const GqaAttentionParams> batch) override {
    cpu::GqaAttention(pool_, batch);
  }
  void MlaAttentionBatch(std::span<const MlaAttentionParams> batch) override {
    cpu::MlaAttention(pool_, batch);
  }

 private:
  cpu::ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<FastCpuBackend>(options);
}

}  // namespace tandem::kernels
