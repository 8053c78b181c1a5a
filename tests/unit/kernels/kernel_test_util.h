#pragma once
// Shared helpers for the kernel tests: random data, bf16 weights, a paged KV pool with a shuffled
// block table, and an error bound for comparing a fast kernel against the reference backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tandem/kernels/attention_params.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/dtype.h"

namespace tandem::kernels::testing {

inline std::vector<float> RandomFloats(std::size_t n, std::mt19937& rng, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<std::uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = F32ToBf16(v[i]);
  return out;
}

// Random binary16 bits of magnitude below 1, with about one in 16 subnormal so that the
// conversions' subnormal path is exercised.
inline std::vector<std::uint16_t> RandomF16(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint16_t> out(n);
  for (std::uint16_t& h : out) {
    const std::uint32_t u = rng();
    const std::uint32_t exp = (u & 0xf0000U) == 0 ? 0 : 5 + (u >> 20) % 10;  // 2^-10 .. 2^-1
    h = static_cast<std::uint16_t>((u & 0x8000U) | (exp << 10) | (u & 0x3ffU));
  }
  return out;
}

// Random e4m3 bytes over the whole finite range (NaN encodings 0x7f/0xff excluded).
inline std::vector<std::uint8_t> RandomFp8(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> out(n);
  for (std::uint8_t& b : out) {
    do {
      b = static_cast<std::uint8_t>(rng());
    } while ((b & 0x7f) == 0x7f);
  }
  return out;
}

// Blocks of FP8 test weights: smaller than DeepSeek's 128 x 128 so that small matrices span
// several blocks (and partial ones) in both directions; rows and columns differ so a swapped
// index shows.
inline constexpr int kTestBlockRows = 16;
inline constexpr int kTestBlockCols = 32;

// A weight matrix held in any dtype, with its view. f32 holds the exact values the view stands
// for (WeightView::At; FP8 dequantised), a float32 twin of the same weight.
struct TestWeight {
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;
  std::vector<std::uint16_t> f16;
  std::vector<std::uint8_t> fp8;
  std::vector<float> scales;
  WeightView view;

  TestWeight(std::int64_t rows, std::int64_t cols, DType dtype, std::mt19937& rng) {
    switch (dtype) {
      case DType::kF32:
        f32 = RandomFloats(rows * cols, rng);
        view = {f32.data(), dtype, rows, cols};
        return;
      case DType::kBF16:
        f32 = RandomFloats(rows * cols, rng);
        bf16 = ToBf16(f32);
        view = {bf16.data(), dtype, rows, cols};
        break;
      case DType::kF16:
        f16 = RandomF16(rows * cols, rng);
        view = {f16.data(), dtype, rows, cols};
        break;
      case DType::kF8E4M3: {
        fp8 = RandomFp8(rows * cols, rng);
        const std::int64_t srows = (rows + kTestBlockRows - 1) / kTestBlockRows;
        const std::int64_t scols = (cols + kTestBlockCols - 1) / kTestBlockCols;
        // Scales like a quantiser's amax / 448 for weights of magnitude ~1, varied per block.
        scales = RandomFloats(srows * scols, rng, 0.5f / 448, 2.0f / 448);
        view = {fp8.data(), dtype, rows, cols, {scales.data(), scols, kTestBlockRows, kTestBlockCols}};
        break;
      }
    }
    f32.resize(rows * cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) f32[r * cols + c] = view.At(r, c);
    }
  }
  WeightView F32Twin() const { return {f32.data(), DType::kF32, view.rows, view.cols}; }
};

// |got - want| <= rel * bound elementwise, where bound is the magnitude the rounding error of the
// computation scales with (e.g. sum |x_i * w_i| for a dot product).
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                        const std::vector<float>& bound, float rel) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (std::size_t i = 0; i < got.size() && failures < 5; ++i) {
    const float tol = rel * std::max(bound[i], 1e-30f);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i]
                    << " tolerance " << tol;
      ++failures;
    }
  }
}

// Names of tests parameterised over the ISA copies (tuple element IsaIndex): the case's index and
// the ISA, so that a failure says which copy failed.
template <typename Tuple, std::size_t IsaIndex>
std::string IsaParamName(const ::testing::TestParamInfo<Tuple>& info) {
  return std::to_string(info.index) + "_" + std::string(CpuIsaName(std::get<IsaIndex>(info.param)));
}

// Names of tests parameterised over the ISA copies alone: the ISA.
inline std::string IsaName(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(CpuIsaName(info.param));
}

inline bool BitEqual(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// A KV pool of `pool_blocks` blocks; a sequence's block table is a random permutation of a subset,
// so consecutive tokens live in non-contiguous, out-of-order blocks. Block and token strides carry
// padding so that a kernel assuming dense packing reads the wrong floats.
struct PagedPool {
  int block_size;
  std::int64_t token_floats;
  std::int64_t token_stride;
  std::int64_t block_stride;
  std::vector<float> data;
  std::vector<std::int32_t> table;

  PagedPool(int block_size, std::int64_t token_floats, int seq_len, std::mt19937& rng)
      : block_size(block_size),
        token_floats(token_floats),
        token_stride(token_floats + 3),
        block_stride(block_size * (token_floats + 3) + 5) {
    const int blocks = (seq_len + block_size - 1) / block_size;
    const int pool_blocks = blocks * 2 + 1;
    data = RandomFloats(static_cast<std::size_t>(pool_blocks) * block_stride, rng);
    std::vector<std::int32_t> ids(pool_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(ids.begin(), ids.begin() + blocks);
  }

  PagedKvLayer Layer() {
    PagedKvLayer kv;
    kv.layer_base = data.data();
    kv.block_stride = block_stride;
    kv.token_stride = token_stride;
    kv.block_size = block_size;
    kv.block_table = table.data();
    kv.num_blocks = static_cast<int>(table.size());
    return kv;
  }
};

struct GqaShape {
  int n_heads, n_kv_heads, head_dim, block_size, start_pos, n_tokens;
};

// One sequence's queries (in [-2, 2]) and paged cache (K then V per token) for a GQA shape, seeded
// by the shape; Params(first, n, out) is the call for queries [first, first + n).
struct GqaInputs {
  GqaShape shape;
  std::unique_ptr<PagedPool> pool;
  std::vector<float> q;

  explicit GqaInputs(const GqaShape& s) : shape(s) {
    std::mt19937 rng(s.n_heads * 1000 + s.head_dim * 10 + s.start_pos);
    pool = std::make_unique<PagedPool>(s.block_size, 2LL * s.n_kv_heads * s.head_dim,
                                       s.start_pos + s.n_tokens, rng);
    q = RandomFloats(static_cast<std::size_t>(s.n_tokens) * s.n_heads * s.head_dim, rng, -2.0f,
                     2.0f);
  }

  GqaAttentionParams Params(int first_token, int n_tokens, float* out) const {
    GqaAttentionParams p;
    p.q = q.data() + static_cast<std::size_t>(first_token) * shape.n_heads * shape.head_dim;
    p.out = out;
    p.n_tokens = n_tokens;
    p.start_pos = shape.start_pos + first_token;
    p.n_heads = shape.n_heads;
    p.n_kv_heads = shape.n_kv_heads;
    p.head_dim = shape.head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    p.kv = pool->Layer();
    p.k_offset = 0;
    p.v_offset = shape.n_kv_heads * shape.head_dim;
    return p;
  }
};

// A decode-style batch: several sequences of one layer, each with its own cache and position.
struct GqaSequence {
  std::unique_ptr<PagedPool> pool;
  std::vector<float> q;
  int start_pos, n_tokens;
};

inline GqaAttentionParams SequenceParams(GqaSequence& s, int n_heads, int n_kv_heads,
                                         int head_dim, float* out) {
  GqaAttentionParams p;
  p.q = s.q.data();
  p.out = out;
  p.n_tokens = s.n_tokens;
  p.start_pos = s.start_pos;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.head_dim = head_dim;
  p.scale = 0.3f;
  p.kv = s.pool->Layer();
  p.k_offset = 0;
  p.v_offset = n_kv_heads * head_dim;
  return p;
}

}  // namespace tandem::kernels::testing
