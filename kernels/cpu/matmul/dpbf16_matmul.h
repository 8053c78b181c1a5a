#pragma once

#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

// The AVX-512 copy only: the other copies compile this to nothing.
#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN

// The MatMuls of amx_matmul.h (plain, gated pair, stacked parts; the same arguments) with
// AVX512-BF16's VDPBF16PS instead of AMX tiles, for CPUs that have the instruction but no AMX
// (AMD Zen 4 and later, Intel Cooper Lake): x rounded to bf16 (nearest even), each output one
// float32 accumulator onto which the instruction adds the products of one column pair at a time,
// the pairs in column order from 0. The instruction computes every lane alike, so an output
// depends only on its row of x and its row of w: y[r][o] is bit-identical for any `rows`, any
// place of the row in a register block and any thread. The bits differ from the AMX kernel's
// (another instruction, another sum order) and from the float32 MatMuls'.
void Dpbf16MatMulInto(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                      std::int64_t hidden, std::span<const std::int64_t> part_rows,
                      std::span<float* const> outputs, float* y);

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
