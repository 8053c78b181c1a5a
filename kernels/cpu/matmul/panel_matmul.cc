#include "matmul/panel_matmul.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "matmul/matmul_tasks.h"
#include "simd/simd.h"

TANDEM_KERNELS_ISA_BEGIN
namespace {

// A panel's 32 outputs are two 16-lane vectors.
constexpr int kVecs = kPanelRows / kLanes;
static_assert(kVecs * kLanes == kPanelRows);

// The register tile: kTileRows input rows x the panel's 32 outputs, one accumulator vector each;
// per column, two weight vectors and kTileRows broadcasts feed 2 x kTileRows FMAs.
#if defined(TANDEM_SIMD_AVX512)
constexpr int kTileRows = 8;  // 16 zmm accumulators + 2 weights + 1 broadcast (of 32)
#elif defined(TANDEM_SIMD_AVX2)
constexpr int kTileRows = 3;  // 12 ymm accumulators + 2 weight halves + 1 broadcast (of 16)
#else
constexpr int kTileRows = 4;
#endif
// Row blocks (prefill) on AVX2 run tiles of 6 rows x half a panel instead (HalfPanelTile): 12 ymm
// accumulators, the half's two weight ymm and one broadcast fit the 16 registers, where the 3 x 32
// tile above leaves no register for its four weight ymm and reloads each once per row (12 loads
// folded into the FMAs plus 3 broadcasts per 12 FMAs, against 8 per 12). Decode batches keep the
// whole-panel tile: the second half's pass would read a panel that is no longer in L1.
#if defined(TANDEM_SIMD_AVX2)
constexpr int kBlockTileRows = 6;
constexpr bool kHalfPanelTiles = true;
#else
constexpr int kBlockTileRows = kTileRows;
constexpr bool kHalfPanelTiles = false;
#endif
// Columns per slice: a panel's slice (kSlice x 32 weights, 32 KiB in float32) stays in L1 while
// every row tile of the block reads it, and the block's x slice (kRowBlock x kSlice floats,
// 256 KiB) stays in L2 while the panels pass.
constexpr std::int64_t kSlice = 256;
constexpr std::int64_t kRowBlock = 256;

// Software prefetch this many bytes ahead in a panel: a decode batch reads each panel as one
// sequential stream, which the hardware prefetchers alone leave short of the memory's bandwidth
// (measured on the AVX-512 dev machine, GEMV from memory: 0.72-0.89 of the row-major kernel's
// rate without it, 0.9-1.07 at 1 KiB, 1.0-1.1 at 2 KiB with two panels per tile, less at 4 KiB).
constexpr int kPanelPrefetch = 2048;
template <typename T>
inline void PrefetchPanel(const T* column) {
  const char* at = reinterpret_cast<const char*>(column) + kPanelPrefetch;
  __builtin_prefetch(at);
  if constexpr (sizeof(T) * kPanelRows > 64) __builtin_prefetch(at + 64);
}

// Column k of a panel as two float32 vectors (outputs 0-15, 16-31), per dtype, walked block by
// block of columns: BlockAt(k) is what loads the columns of the block holding column k, up to
// BlockEnd(k, n). Widening is exact; FP8 is value * its block's scale (kFp8LoadFactor as in
// simd.h), the product the row-major kernels and WeightView::At form.
//
// float32, bf16 (kHalf false: simd.h's Load widens bf16) or f16 (kHalf true: F16C): one block
// spans the slice.
template <typename T, bool kHalf = false>
struct PlainColumns {
  const T* panel;  // the panel's column 0
  std::int64_t BlockEnd(std::int64_t, std::int64_t n) const { return n; }
  const PlainColumns& BlockAt(std::int64_t) const { return *this; }
  template <bool kFetch = true>
  void Load2(std::int64_t k, F32x16 (&w)[kVecs]) const {
    if constexpr (kFetch) PrefetchPanel(panel + k * kPanelRows);
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) {
      const T* at = panel + k * kPanelRows + v * kLanes;
      if constexpr (kHalf) {
        w[v] = LoadF16(at);
      } else {
        w[v] = Load(at);
      }
    }
  }
};
using HalfColumns = PlainColumns<std::uint16_t, true>;
// FP8: the slice's scales are gathered once per panel slice into `scales`: per column block of
// the slice, the 32 outputs' scales (times kFp8LoadFactor).
struct Fp8Columns {
  const std::uint8_t* panel;
  const float* scales;
  std::int64_t k0;  // the slice's first column: blocks are counted from its block
  int shift;        // log2(block columns)
  // One column block's view: its scales held in registers for the block's columns.
  struct Block {
    const std::uint8_t* panel;
    F32x16 scale[kVecs];
    template <bool kFetch = true>
    void Load2(std::int64_t k, F32x16 (&w)[kVecs]) const {
      if constexpr (kFetch) PrefetchPanel(panel + k * kPanelRows);
      static_assert(kVecs == 2);
      LoadFp8x32(panel + k * kPanelRows, w);
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) w[v] = Mul(w[v], scale[v]);
    }
  };
  // The end (exclusive, at most n) of the block holding slice column k.
  std::int64_t BlockEnd(std::int64_t k, std::int64_t n) const {
    return std::min(n, ((((k0 + k) >> shift) + 1) << shift) - k0);
  }
  Block BlockAt(std::int64_t k) const {
    const float* s = scales + (((k0 + k) >> shift) - (k0 >> shift)) * kPanelRows;
    return {panel, {Load(s), Load(s + kLanes)}};
  }
};
// Columns [0, n) of one panel as the tiles would load them (widened; FP8 times its scales), stored
// as a float32 panel: a block of rows then converts each weight once rather than once per tile of
// kTileRows rows (on AVX-512 the two conversions per column took the FMA ports a fifth of the
// time). Same values, so the same bits as converting in the tile.
template <typename Columns>
void WidenSlice(const Columns& cols, std::int64_t n, float* out) {
  for (std::int64_t k = 0; k < n;) {
    const std::int64_t end = cols.BlockEnd(k, n);
    const auto block = cols.BlockAt(k);
    for (; k < end; ++k) {
      F32x16 w[kVecs];
      block.Load2(k, w);
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) Store(out + k * kPanelRows + v * kLanes, w[v]);
    }
  }
}

#if defined(TANDEM_SIMD_AVX512) || defined(TANDEM_SIMD_AVX2)
// rows[i] lane j -> columns[j] lane i, for 8 x 8 floats.
inline void Transpose8x8(const __m256 (&rows)[8], __m256 (&columns)[8]) {
  __m256 pairs[8], quads[8];
  for (int i = 0; i < 8; i += 2) {
    pairs[i] = _mm256_unpacklo_ps(rows[i], rows[i + 1]);
    pairs[i + 1] = _mm256_unpackhi_ps(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    quads[i] = _mm256_shuffle_ps(pairs[i], pairs[i + 2], 0x44);
    quads[i + 1] = _mm256_shuffle_ps(pairs[i], pairs[i + 2], 0xEE);
    quads[i + 2] = _mm256_shuffle_ps(pairs[i + 1], pairs[i + 3], 0x44);
    quads[i + 3] = _mm256_shuffle_ps(pairs[i + 1], pairs[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    columns[j] = _mm256_permute2f128_ps(quads[j], quads[j + 4], 0x20);
    columns[j + 4] = _mm256_permute2f128_ps(quads[j], quads[j + 4], 0x31);
  }
}
#endif

// x rows [0, R) (x_stride apart) over n columns, column by column: xp[k * R + i] = x[i][k]. The
// tile then reads its R broadcasts from one line rather than from R rows at equal offsets of a
// power-of-two stride, which share L1 sets. A pure copy: the packing never changes a product.
template <int R>
void PackRows(const float* x, std::int64_t x_stride, std::int64_t n, float* xp) {
  std::int64_t k = 0;
#if defined(TANDEM_SIMD_AVX512) || defined(TANDEM_SIMD_AVX2)
  // Eight columns at a time by an 8 x 8 transpose (one scalar load and store per float took 2% of
  // a float32 prefill). Below 8 rows the missing rows are zero and each column's store spills
  // 8 - R floats into the next column's place, which that column's own store then overwrites, so
  // a block runs only while a column follows it (R >= 4: the spill fits in that column).
  if constexpr (R >= 4 && R <= 8) {
    constexpr std::int64_t kSpill = R < 8 ? 1 : 0;
    for (; k + 8 + kSpill <= n; k += 8) {
      __m256 rows[8], columns[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        rows[i] = i < R ? _mm256_loadu_ps(x + i * x_stride + k) : _mm256_setzero_ps();
      }
      Transpose8x8(rows, columns);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(xp + (k + j) * R, columns[j]);
    }
  }
#endif
  for (; k < n; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) xp[k * R + i] = x[i * x_stride + k];
  }
}

// The panel slice the prefill plan reads next, fetched into L2 a share per tile while the tiles
// of the current one compute: otherwise the first tile of every panel slice waits on memory, which
// at 64-256 rows (decode batches, short prompts) is a third of the MatMul's time.
struct Lookahead {
  const char* at = nullptr;
  const char* end = nullptr;
  std::int64_t lines_per_tile = 0;
  // This tile's share: `lines` cache lines from `from`.
  std::int64_t Take(const char** from) {
    *from = at;
    const std::int64_t lines = std::min<std::int64_t>(lines_per_tile, (end - at) / 64);
    at += lines * 64;
    return lines;
  }
};

// R rows (packed by PackRows) against columns [0, n) of P panels, onto 0 (`first`) or onto the
// sums an earlier slice left in y[p]; panel p's first valid[p] outputs are stored. Two panels at
// once give a lone row (decode) four independent FMA chains and two weight streams.
template <int R, int P, typename Columns, bool kFetch = true>
void Tile(const float* xp, const Columns* cols, std::int64_t n, bool first, float* const* y,
          std::int64_t y_stride, const int* valid, Lookahead* ahead) {
  const char* fetch = nullptr;
  const std::int64_t fetch_lines = ahead->Take(&fetch);
  F32x16 acc[R][P * kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < P * kVecs; ++v) {
      const int lanes = std::clamp(valid[v / kVecs] - v % kVecs * kLanes, 0, kLanes);
      const float* at = y[v / kVecs] + r * y_stride + v % kVecs * kLanes;
      acc[r][v] = first ? Zero() : lanes == kLanes ? Load(at) : LoadPartial(at, lanes);
    }
  }
  // Block by block (FP8: one scale block of columns, its scales in registers; other dtypes: the
  // whole slice), then column by column.
  for (std::int64_t k = 0; k < n;) {
    const std::int64_t end = cols[0].BlockEnd(k, n);  // the panels' blocks share columns
    using BlockT = std::remove_cvref_t<decltype(cols[0].BlockAt(k))>;
    BlockT blocks[P] = {cols[0].BlockAt(k)};
    for (int p = 1; p < P; ++p) blocks[p] = cols[p].BlockAt(k);
    for (; k < end; ++k) {
      if (k < fetch_lines) __builtin_prefetch(fetch + k * 64, 0, 2);  // to L2
      F32x16 w[P][kVecs];
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) blocks[p].template Load2<kFetch>(k, w[p]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const Bcast b = Broadcast(xp[k * R + r]);
#pragma GCC unroll 4
        for (int v = 0; v < P * kVecs; ++v) {
          acc[r][v] = FmaB(b, w[v / kVecs][v % kVecs], acc[r][v]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < P * kVecs; ++v) {
      const int lanes = std::clamp(valid[v / kVecs] - v % kVecs * kLanes, 0, kLanes);
      float* at = y[v / kVecs] + r * y_stride + v % kVecs * kLanes;
      if (lanes == kLanes) {
        Store(at, acc[r][v]);
      } else if (lanes > 0) {
        StorePartial(at, acc[r][v], lanes);
      }
    }
  }
}

// R rows (packed by PackRows) against outputs [16 V, 16 V + 16) of one float32 panel: Tile's
// arithmetic for those outputs (one FMA per column, in column order, onto 0 or y's sums), so the
// same bits; the panel's first `valid` outputs are stored. The V = 0 pass brings the panel slice
// into L1 (and its share of the next one into L2); the V = 1 pass finds it there.
template <int R, int V>
void HalfPanelTile(const float* xp, const float* panel, std::int64_t n, bool first, float* y,
                   std::int64_t y_stride, int valid, const char* fetch, std::int64_t fetch_lines) {
  const int lanes = std::clamp(valid - V * kLanes, 0, kLanes);
  if (lanes == 0) return;
  F32x16 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float* at = y + r * y_stride + V * kLanes;
    acc[r] = first ? Zero() : lanes == kLanes ? Load(at) : LoadPartial(at, lanes);
  }
  for (std::int64_t k = 0; k < n; ++k) {
    if constexpr (V == 0) {
      if (k < fetch_lines) __builtin_prefetch(fetch + k * 64, 0, 2);  // to L2
      PrefetchPanel(panel + k * kPanelRows);
    }
    const F32x16 w = Load(panel + k * kPanelRows + V * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = FmaB(Broadcast(xp[k * R + r]), w, acc[r]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* at = y + r * y_stride + V * kLanes;
    if (lanes == kLanes) {
      Store(at, acc[r]);
    } else {
      StorePartial(at, acc[r], lanes);
    }
  }
}

// Rows [r0, r1), packed by PackTiles<R>, against one float32 panel by half-panel tiles.
template <int R = kBlockTileRows>
void HalfPanelTiles(const float* xp, std::int64_t r0, std::int64_t r1, const float* panel,
                    std::int64_t n, bool first, float* y, std::int64_t out, int valid,
                    Lookahead* ahead) {
  std::int64_t r = r0;
  for (; r + R <= r1; r += R, xp += R * n) {
    const char* fetch = nullptr;
    const std::int64_t fetch_lines = ahead->Take(&fetch);
    HalfPanelTile<R, 0>(xp, panel, n, first, y + r * out, out, valid, fetch, fetch_lines);
    HalfPanelTile<R, 1>(xp, panel, n, first, y + r * out, out, valid, nullptr, 0);
  }
  if constexpr (R > 1) {
    if (r < r1) HalfPanelTiles<R - 1>(xp, r, r1, panel, n, first, y, out, valid, ahead);
  }
}

// Rows [r0, r1) of a slice packed as tiles of R rows, then one smaller tile for the rest.
template <int R = kTileRows>
void PackTiles(const float* x, std::int64_t in, std::int64_t r0, std::int64_t r1, std::int64_t k0,
               std::int64_t n, float* xp) {
  std::int64_t r = r0;
  for (; r + R <= r1; r += R, xp += R * n) PackRows<R>(x + r * in + k0, in, n, xp);
  if constexpr (R > 1) {
    if (r < r1) PackTiles<R - 1>(x, in, r, r1, k0, n, xp);
  }
}

// Rows [r0, r1), packed by PackTiles, against P panels (y[p]: panel p's output column 0).
// slice_in_l1: the panels' slice stays in L1 between tiles (the prefill plan's slices; a decode
// batch's whole rows do not).
template <int P, typename Columns, int R = kTileRows>
void TilesAgainstPanels(const float* xp, std::int64_t r0, std::int64_t r1, const Columns* cols,
                        std::int64_t n, bool first, float* const* y, std::int64_t out,
                        const int* valid, Lookahead* ahead, bool slice_in_l1) {
  std::int64_t r = r0;
  for (; r + R <= r1; r += R, xp += R * n) {
    float* yr[P];
    for (int p = 0; p < P; ++p) yr[p] = y[p] + r * out;
    // The first tile brings the panel slice into L1 for the rest of the block: their prefetches
    // would only take load slots.
    if (r == r0 || !slice_in_l1) {
      Tile<R, P>(xp, cols, n, first, yr, out, valid, ahead);
    } else {
      Tile<R, P, Columns, false>(xp, cols, n, first, yr, out, valid, ahead);
    }
  }
  if constexpr (R > 1) {
    if (r < r1) {
      TilesAgainstPanels<P, Columns, R - 1>(xp, r, r1, cols, n, first, y, out, valid, ahead,
                                            slice_in_l1);
    }
  }
}

// Batches up to this many rows (decode) run each panel over all columns at once, panel after
// panel: the weights stream through once in storage order and the sums stay in registers; x (at
// most this many rows) is packed whole. Larger batches go by blocks of rows and slices of
// columns (above), so that a panel slice read once serves a whole block.
constexpr std::int64_t kWholeRowsMax = 16;
// A block whose packed x (rows x all columns, float32) is at most this size runs panel by panel.
constexpr std::int64_t kPanelMajorXBytes = std::int64_t{1} << 20;

// Rows per block: 129 rows go as 65 + 64 rather than 128 + 1 (a short block streams every panel
// again for a sliver of rows), and up to kRowBlock rows read the weights once.
struct Plan {
  std::int64_t rows, row_block, slice, in;
  std::int64_t RowEnd(std::int64_t r) const { return std::min(rows, r); }
  // Where block [r0, r1)'s slice at column k0 starts in the packed x: each block is its rows x
  // in floats, slice after slice, each slice tile after tile (PackTiles).
  std::int64_t PackedAt(std::int64_t r0, std::int64_t r1, std::int64_t k0) const {
    return r0 * in + (r1 - r0) * k0;
  }
  // FP8: the scales of one slice for two panels, per column block (at least 16 columns) and
  // output.
  std::int64_t ScaleFloats() const { return 2 * (std::min(slice, in) / kLanes + 2) * kPanelRows; }
};
Plan PlanFor(std::int64_t rows, std::int64_t in) {
  if (rows <= kWholeRowsMax) return {rows, rows, in, in};
  const std::int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  // Whole tiles per block: 2,000 rows go as 7 x 256 + 208 rather than 8 x 250, whose 2-row
  // remainder tile in every block runs at a fraction of the 8-row tile's rate.
  const std::int64_t per_block = (rows + blocks - 1) / blocks;
  return {rows, (per_block + kBlockTileRows - 1) / kBlockTileRows * kBlockTileRows, kSlice, in};
}

// Rows up to this many share one tile with two panels (AVX-512: 4 rows x 4 accumulators).
constexpr std::int64_t kPairRowsMax = std::max(1, kTileRows / 2);

// Rows [r0, r1) (packed in xp) against panels [p, p + P) over columns [k0, k0 + n).
// `widened` (a slice's kSlice x 32 floats, or null): where the panel slice is widened before the
// tiles read it (P == 1 only). `row_blocks`: the prefill plan (x packed by tiles of
// kBlockTileRows rows), else a decode batch's (kTileRows).
template <typename T, int P>
void PanelsAt(const WeightView& w, const T* base, std::int64_t p, std::int64_t k0, std::int64_t n,
              const float* xp, std::int64_t r0, std::int64_t r1, float* scales, float* widened,
              bool row_blocks, float* y, Lookahead* ahead) {
  const std::int64_t in = w.cols, out = w.rows;
  int valid[P];
  float* yp[P];
  const T* panel[P];
  for (int i = 0; i < P; ++i) {
    const std::int64_t o0 = (p + i) * kPanelRows;
    valid[i] = static_cast<int>(std::min<std::int64_t>(kPanelRows, out - o0));
    yp[i] = y + o0;  // the tiles add r * out
    panel[i] = base + ((p + i) * in + k0) * kPanelRows;
  }
  const bool first = k0 == 0;
  // The tiles against the panels read through `cols`, or through their float32 copy.
  auto tiles = [&]<typename Columns>(const Columns* cols) {
    if constexpr (P == 1 && kHalfPanelTiles) {
      if (row_blocks) {
        const float* panel_f32 = nullptr;
        if constexpr (std::is_same_v<Columns, PlainColumns<float>>) {
          panel_f32 = cols[0].panel;
        } else {
          WidenSlice(cols[0], n, widened);
          panel_f32 = widened;
        }
        return HalfPanelTiles(xp, r0, r1, panel_f32, n, first, yp[0], out, valid[0], ahead);
      }
    }
    if constexpr (P == 1 && !std::is_same_v<T, float>) {
      if (widened != nullptr) {
        WidenSlice(cols[0], n, widened);
        const PlainColumns<float> plain[1] = {{widened}};
        return TilesAgainstPanels<P>(xp, r0, r1, plain, n, first, yp, out, valid, ahead,
                                     row_blocks);
      }
    }
    TilesAgainstPanels<P>(xp, r0, r1, cols, n, first, yp, out, valid, ahead, row_blocks);
  };
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    const int shift = std::countr_zero(static_cast<unsigned>(w.scales.block_cols));
    const std::int64_t blocks = ((k0 + n - 1) >> shift) - (k0 >> shift) + 1;
    // BlockScales::At's two divisions per (block, output) were 40% of a decode GEMV's time: one
    // division per output finds its row of scales, whose blocks are then consecutive.
    Fp8Columns cols[P];
    for (int i = 0; i < P; ++i) {
      float* mine = scales + i * blocks * kPanelRows;
      for (int j = 0; j < kPanelRows; ++j) {
        if (j >= valid[i]) {
          for (std::int64_t b = 0; b < blocks; ++b) mine[b * kPanelRows + j] = 0.0f;
          continue;
        }
        const std::int64_t row = (p + i) * kPanelRows + j + w.scales.row0;
        const float* of_row =
            w.scales.data + row / w.scales.block_rows * w.scales.cols + (k0 >> shift);
        for (std::int64_t b = 0; b < blocks; ++b) {
          mine[b * kPanelRows + j] = of_row[b] * kFp8LoadFactor;
        }
      }
      cols[i] = {panel[i], mine, k0, shift};
    }
    tiles(cols);
  } else {
    auto run = [&]<typename Columns>() {
      Columns cols[P];
      for (int i = 0; i < P; ++i) cols[i] = {panel[i]};
      tiles(cols);
    };
    if constexpr (std::is_same_v<T, float>) {
      run.template operator()<PlainColumns<float>>();
    } else if (w.dtype == DType::kF16) {
      run.template operator()<HalfColumns>();
    } else {
      run.template operator()<PlainColumns<std::uint16_t>>();
    }
  }
}

// x packed once for every task: block by block of rows, slice by slice of columns, tasks
// [task * blocks_and_slices / tasks, ...) of the blocks' slices.
void PackAll(ThreadPool& pool, int tasks, const float* x, const Plan& plan, float* xp) {
  const std::int64_t blocks = (plan.rows + plan.row_block - 1) / plan.row_block;
  const std::int64_t slices = (plan.in + plan.slice - 1) / plan.slice;
  const std::int64_t units = blocks * slices;
  auto pack = [&](std::int64_t u0, std::int64_t u1) {
    for (std::int64_t u = u0; u < u1; ++u) {
      const std::int64_t r0 = u / slices * plan.row_block, k0 = u % slices * plan.slice;
      const std::int64_t r1 = plan.RowEnd(r0 + plan.row_block);
      const std::int64_t n = std::min(plan.slice, plan.in - k0);
      float* to = xp + plan.PackedAt(r0, r1, k0);
      if (plan.rows > kWholeRowsMax) {
        PackTiles<kBlockTileRows>(x, plan.in, r0, r1, k0, n, to);
      } else {
        PackTiles<kTileRows>(x, plan.in, r0, r1, k0, n, to);
      }
    }
  };
  const int pack_tasks = static_cast<int>(std::min<std::int64_t>(tasks, units));
  if (pack_tasks <= 1) return pack(0, units);
  pool.Run(pack_tasks, [&](int task, int) {
    pack(units * task / pack_tasks, units * (task + 1) / pack_tasks);
  });
}

// Panels [p_begin, p_end) for every row: block by block of rows, slice by slice of columns, each
// panel slice read from memory once per block.
template <typename T>
void PanelRange(const float* xp, const WeightView& w, const Plan& plan, std::int64_t p_begin,
                std::int64_t p_end, float* scales, float* widened, float* y) {
  const std::int64_t in = w.cols;
  const T* base = static_cast<const T*>(w.data);
  for (std::int64_t r0 = 0; r0 < plan.rows; r0 += plan.row_block) {
    const std::int64_t r1 = plan.RowEnd(r0 + plan.row_block);
    // Pairs of panels when a single tile covers the rows (decode): twice the chains and the
    // streams. The pairing only decides which outputs share a loop, never an output's sum.
    const bool pairs = r1 - r0 <= kPairRowsMax;
    // Panel by panel (each panel's slices in storage order, one sequential stream per task)
    // while the block's whole packed x fits in L2 beside the panel slice; else slice by slice,
    // so that only one x slice at a time needs to stay in L2.
    const bool panel_major =
        !pairs && (r1 - r0) * in * static_cast<std::int64_t>(sizeof(float)) <= kPanelMajorXBytes;
    auto next_of = [&](std::int64_t p, std::int64_t k0) -> std::pair<std::int64_t, std::int64_t> {
      const std::int64_t k_next = k0 + plan.slice < in ? k0 + plan.slice : 0;
      if (panel_major) return {k_next != 0 ? p : (p + 1 < p_end ? p + 1 : p_begin), k_next};
      return p + 1 < p_end ? std::pair{p + 1, k0} : std::pair{p_begin, k_next};
    };
    auto one_panel = [&](std::int64_t p, std::int64_t k0) {
      const std::int64_t n = std::min(plan.slice, in - k0);
      Lookahead ahead;
      if (plan.rows > kWholeRowsMax) {
        const auto [next_p, next_k0] = next_of(p, k0);
        const std::int64_t next_n = std::min(plan.slice, in - next_k0);
        const char* next =
            reinterpret_cast<const char*>(base + (next_p * in + next_k0) * kPanelRows);
        const std::int64_t lines = next_n * kPanelRows * static_cast<std::int64_t>(sizeof(T)) / 64;
        const std::int64_t tiles = (r1 - r0 + kBlockTileRows - 1) / kBlockTileRows;
        ahead = {next, next + lines * 64, (lines + tiles - 1) / tiles};
      }
      const float* block_xp = xp + plan.PackedAt(r0, r1, k0);
      // Blocks of rows (prefill) only: a decode batch's whole-row panels would not stay in L1.
      float* widen_to = plan.rows > kWholeRowsMax ? widened : nullptr;
      PanelsAt<T, 1>(w, base, p, k0, n, block_xp, r0, r1, scales, widen_to,
                     plan.rows > kWholeRowsMax, y, &ahead);
    };
    if (panel_major) {
      for (std::int64_t p = p_begin; p < p_end; ++p) {
        for (std::int64_t k0 = 0; k0 < in; k0 += plan.slice) one_panel(p, k0);
      }
      continue;
    }
    for (std::int64_t k0 = 0; k0 < in; k0 += plan.slice) {
      for (std::int64_t p = p_begin; p < p_end;) {
        if (pairs && p + 1 < p_end) {
          Lookahead none;
          const std::int64_t n = std::min(plan.slice, in - k0);
          PanelsAt<T, 2>(w, base, p, k0, n, xp + plan.PackedAt(r0, r1, k0), r0, r1, scales, nullptr,
                         false, y, &none);
          p += 2;
        } else {
          one_panel(p, k0);
          p += 1;
        }
      }
    }
  }
}

template <typename T>
void PanelMatMulTyped(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                      float* y) {
  const std::int64_t panels = (w.rows + kPanelRows - 1) / kPanelRows;
  const int tasks = MatMulTasks(pool, rows, w.rows, w.cols, panels);
  const Plan plan = PlanFor(rows, w.cols);
  // x is repacked once, shared by the tasks (split by panels): a task packing its own copy
  // repeats the whole repack once per task (9% of a 512-row f32 MatMul at 8 tasks).
  const ScratchPool::Lease xp_lease =
      pool.scratch().Acquire(static_cast<std::size_t>(rows * w.cols) * sizeof(float));
  float* const xp = xp_lease.As<float>();
  PackAll(pool, tasks, x, plan, xp);
  // FP8: per thread, the scales of a slice.
  const std::int64_t per_worker = std::is_same_v<T, std::uint8_t> ? plan.ScaleFloats() : 0;
  std::unique_ptr<float[]> scales(new float[static_cast<std::size_t>(pool.size() * per_worker)]);
  // bf16, f16 and FP8: per thread, one panel slice widened to float32.
  const std::int64_t widened_floats = std::is_same_v<T, float> || rows <= kWholeRowsMax
                                          ? 0
                                          : std::min(plan.slice, plan.in) * kPanelRows;
  // 64-byte aligned (the pool's buffers are), as the packed panels are: the tiles' unaligned
  // vector loads of a scratch at malloc's 16-byte alignment split three lines in four.
  const ScratchPool::Lease widened_lease = pool.scratch().Acquire(
      static_cast<std::size_t>(pool.size() * widened_floats) * sizeof(float));
  float* const widened = widened_lease.As<float>();
  pool.Run(tasks, [&](int task, int worker) {
    const std::int64_t p0 = panels * task / tasks;
    const std::int64_t p1 = panels * (task + 1) / tasks;
    PanelRange<T>(xp, w, plan, p0, p1, scales.get() + worker * per_worker,
                  widened_floats > 0 ? widened + worker * widened_floats : nullptr, y);
  });
}

}  // namespace

void PanelMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                 float* y) {
  if (rows <= 0 || w.rows <= 0) return;
  switch (w.dtype) {
    case DType::kF32:
      return PanelMatMulTyped<float>(pool, x, rows, w, y);
    case DType::kBF16:
    case DType::kF16:
      return PanelMatMulTyped<std::uint16_t>(pool, x, rows, w, y);
    case DType::kF8E4M3:
      return PanelMatMulTyped<std::uint8_t>(pool, x, rows, w, y);
  }
}

TANDEM_KERNELS_ISA_END
