#pragma once
// The row-wise ops of the fast CPU backend. They are cheap next to MatMul and attention, so they
// run on the calling thread; elementwise loops are left to the compiler's vectoriser (it cannot
// reorder a float reduction without -ffast-math, and elementwise math has no order to change).
#include <cstdint>

#include "simd/isa.h"
#include "tandem/kernels/backend.h"

TANDEM_KERNELS_ISA_BEGIN

void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
             float eps, float* y);
void SiluMul(const float* gate, const float* up, std::int64_t n, float* out);
void Axpy(float alpha, const float* x, std::int64_t n, float* y);
void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim, const float* cos,
          const float* sin, RopeLayout layout);
void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows, float* out);

TANDEM_KERNELS_ISA_END
