#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

TANDEM_KERNELS_ISA_BEGIN

// y[r][o] for x: [rows][w.cols] and w in WeightLayout::kPanels (panels.h): every output is
// x[r][0] * w[o][0] + x[r][1] * w[o][1] + ... one FMA per column in column order onto 0 (the
// generic copy: a multiply, then an add), whatever the batch, the tile or the thread, so y[r][o]
// is bit-identical for any `rows` and any position of row r in the batch. The AVX2 and AVX-512
// copies give the same bits. Weights are widened per column in registers (FP8: value * block
// scale, one rounding).
void PanelMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                 float* y);

TANDEM_KERNELS_ISA_END
