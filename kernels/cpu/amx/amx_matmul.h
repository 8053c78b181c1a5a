#pragma once

#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

// The AVX-512 copy only: the other copies compile this to nothing.
#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN

// y[r][o] for x: [rows][w.cols] and w bf16 in WeightLayout::kBf16Tiles, on AMX tiles: x rounded to
// bf16 (nearest even), products summed in float32 by TDPBF16PS, 32 columns per instruction, the
// chunks in column order onto 0. An output depends only on its row of x and its row of w (the
// same instructions on the same operands whatever the batch, the row's place in a tile, the tile
// or the thread), so y[r][o] is bit-identical for any `rows`. Its bits differ from the float32
// MatMuls' (x is rounded first; the instruction's internal sum order is the hardware's).
// Only for a CPU with AMX-TILE, AMX-BF16 and AVX512-BF16 whose process holds the OS's permission
// to use the tile registers (cpu_backend.cc asks for it before creating a backend that runs this).
void AmxBf16MatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                   float* y);
// Backend::GatedMatMul on AMX: w = PanelWeight::PackGated(gate, up), y: [rows][hidden] =
// silu(x . gate) * (x . up), combined as the pair of groups leaves its accumulators (the same bits
// as AmxBf16MatMul over w followed by SiluMul; the pair's products never go to memory).
void AmxBf16GatedMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                        std::int64_t hidden, float* y);
// Backend::StackedMatMul on AMX: w = PanelWeight::PackStacked(parts), part i's outputs to
// outputs[i] ([rows][part_rows[i]]); x is packed once for all parts. The same bits as
// AmxBf16MatMul of each part.
void AmxBf16StackedMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                          std::span<const std::int64_t> part_rows, std::span<float* const> outputs);
// The three above: y, or the gated pair's combination (hidden > 0), or the parts' outputs.
void AmxBf16MatMulInto(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                       std::int64_t hidden, std::span<const std::int64_t> part_rows,
                       std::span<float* const> outputs, float* y);

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
