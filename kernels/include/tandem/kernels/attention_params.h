#pragma once

#include <cstdint>

namespace tandem::kernels {

// Where one layer's KV lives in a paged pool. Token t of a sequence is in block
// block_table[t / block_size], row t % block_size; its floats start at
//   layer_base + block_table[t / block_size] * block_stride + (t % block_size) * token_stride.
struct PagedKvLayer {
  float* layer_base = nullptr;
  std::int64_t block_stride = 0;
  std::int64_t token_stride = 0;
  int block_size = 0;
  const std::int32_t* block_table = nullptr;
  int num_blocks = 0;  // entries in block_table

  float* TokenRow(std::int64_t t) const {
    return layer_base + static_cast<std::int64_t>(block_table[t / block_size]) * block_stride +
           (t % block_size) * token_stride;
  }
};

// Grouped-query attention of one sequence's chunk of queries against its paged K/V (causal).
// Query i sits at position start_pos + i and attends to positions [0, start_pos + i].
// K of a token is at TokenRow(t) + k_offset as [n_kv_heads][head_dim]; V at v_offset likewise.
struct GqaAttentionParams {
  const float* q = nullptr;  // [n_tokens][n_heads][head_dim]
  float* out = nullptr;      // [n_tokens][n_heads][head_dim]
  int n_tokens = 0;
  int start_pos = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  PagedKvLayer kv;
  int k_offset = 0;
  int v_offset = 0;
};

// Multi-head latent attention in its absorbed form (DeepSeek-V2/V3): the cache holds per token the
// normalised latent c (kv_lora_rank floats at TokenRow(t)) followed by the shared rope key
// (rope_dim floats). score(h, t) = scale * (q_latent[h] . c_t + q_rope[h] . k_rope_t);
// out_latent[h] = sum_t softmax(score)[t] * c_t. The caller folds W_UK into q and W_UV into out.
struct MlaAttentionParams {
  const float* q_latent = nullptr;  // [n_tokens][n_heads][kv_lora_rank]
  const float* q_rope = nullptr;    // [n_tokens][n_heads][rope_dim]
  float* out_latent = nullptr;      // [n_tokens][n_heads][kv_lora_rank]
  int n_tokens = 0;
  int start_pos = 0;
  int n_heads = 0;
  int kv_lora_rank = 0;
  int rope_dim = 0;
  float scale = 1.0f;
  PagedKvLayer kv;
};

// Bidirectional multi-head attention of one sequence, as in vision encoders: every token attends to
// every token, no cache. Head h of token t reads q[t * q_stride + h * head_dim] (head_dim floats),
// likewise k and v with kv_stride (so q, k and v may be slices of one fused qkv buffer), and writes
// out[t * out_stride + h * head_dim].
struct FullAttentionParams {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  int n_tokens = 0;
  int n_heads = 0;
  int head_dim = 0;
  std::int64_t q_stride = 0;
  std::int64_t kv_stride = 0;
  std::int64_t out_stride = 0;
  float scale = 1.0f;
};

}  // namespace tandem::kernels
