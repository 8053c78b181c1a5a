#pragma once
// The fast backend's kernels as one table per compiled ISA copy (isa.h), so that the backend picks
// a copy once, by CPUID, and calls through it. Code outside the copies sees only this header.
#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "tandem/kernels/attention_params.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/dtype.h"

namespace tandem::kernels::cpu {

struct KernelTable {
  void (*mat_mul)(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                  float* y);
  void (*gqa_attention)(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
  void (*mla_attention)(ThreadPool& pool, std::span<const MlaAttentionParams> batch);
  void (*rms_norm)(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                   float eps, float* y);
  void (*silu_mul)(const float* gate, const float* up, std::int64_t n, float* out);
  void (*axpy)(float alpha, const float* x, std::int64_t n, float* y);
  void (*rope)(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
               const float* cos, const float* sin, RopeLayout layout);
  void (*embed)(const WeightView& table, const std::int32_t* ids, std::int64_t rows, float* out);
  void (*layer_norm)(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                     const WeightView& bias, float eps, float* y);
  void (*gelu)(const float* x, std::int64_t n, GeluForm form, float* out);
  void (*add_bias)(float* y, std::int64_t rows, const WeightView& bias);
  void (*full_attention)(ThreadPool& pool, const FullAttentionParams& p);
  void (*full_attention_reference)(const FullAttentionParams& p);
  // MatMul of WeightLayout::kBf16Tiles weights on AMX (amx_matmul.h): the AVX-512 copy only, null
  // in the others; callable only where the CPU and the OS allow AMX.
  void (*amx_bf16_mat_mul)(ThreadPool& pool, const float* x, std::int64_t rows,
                           const WeightView& w, float* y);
  // Backend::GatedMatMul on AMX (amx_matmul.h); as amx_bf16_mat_mul.
  void (*amx_bf16_gated_mat_mul)(ThreadPool& pool, const float* x, std::int64_t rows,
                                 const WeightView& w, std::int64_t hidden, float* y);
  // Backend::StackedMatMul on AMX (amx_matmul.h); as amx_bf16_mat_mul.
  void (*amx_bf16_stacked_mat_mul)(ThreadPool& pool, const float* x, std::int64_t rows,
                                   const WeightView& w, std::span<const std::int64_t> part_rows,
                                   std::span<float* const> outputs);
  // GqaAttention in bf16 products on AMX (amx_attention.h); as amx_bf16_mat_mul.
  void (*amx_gqa_attention)(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
  // GqaAttention in bf16 products with AVX512-BF16 (amx_attention.h); as dpbf16_mat_mul_into.
  void (*dpbf16_gqa_attention)(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
  // MatMul, GatedMatMul (hidden > 0) or StackedMatMul (part_rows not empty) of kBf16Tiles weights
  // with AVX512-BF16 dot products (dpbf16_matmul.h): the AVX-512 copy only, null in the others;
  // callable only where the CPU has AVX512-BF16.
  void (*dpbf16_mat_mul_into)(ThreadPool& pool, const float* x, std::int64_t rows,
                              const WeightView& w, std::int64_t hidden,
                              std::span<const std::int64_t> part_rows,
                              std::span<float* const> outputs, float* y);
};

// Defined by the copies the build compiled (kernels/CMakeLists.txt: TANDEM_KERNELS_ISAS); the
// generic one always exists.
extern const KernelTable kGenericKernels;
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;

}  // namespace tandem::kernels::cpu
