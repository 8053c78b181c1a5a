#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

TANDEM_KERNELS_ISA_BEGIN

// y[r][o] = Dot(x[r], w[o]) (simd.h's canonical order) for x: [rows][w.cols], y: [rows][w.rows].
// Threads split the output rows; tiles share each loaded weight chunk among several input rows.
// Neither the tiling nor the thread split touches the per-element operation order, so y[r][o] is
// bit-identical for any `rows` and any position of row r in the batch.
// Every dtype is read in place: F16 and FP8 chunks are widened in registers (FP8 times its block
// scale, w.scales.block_cols a power of two >= 16), never into a float32 copy of the weight.
void MatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w, float* y);

TANDEM_KERNELS_ISA_END
