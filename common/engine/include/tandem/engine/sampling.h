#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/optional.h"

namespace tandem::engine {

// Per-request decoding parameters. Semantics follow OpenAI / vLLM (penalties) and Hugging Face
// (repetition penalty, warper order); see Sampler for the exact pipeline.
struct SamplingParams {
  // 0 selects greedy decoding: argmax, lowest token id on ties.
  float temperature = 1.0f;
  // <= 0: disabled. Otherwise keep the top_k most likely tokens (ties broken by lower id).
  int top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches top_p. 1: disabled.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the most likely token's. 0: disabled.
  float min_p = 0.0f;
  // logit -= presence_penalty * [count > 0] + frequency_penalty * count, over generated tokens.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // HF semantics over prompt + generated tokens: positive logits are divided by it, negative ones
  // multiplied. 1: disabled.
  float repetition_penalty = 1.0f;
  // Generation finishes (reason kStop) after emitting one of these; the token is reported.
  std::vector<std::int32_t> stop_token_ids;
  // When false, the model's eos_token_id is an implicit stop token.
  bool ignore_eos = false;
  int max_tokens = 16;
  // Absent: the seed is derived from the request id (StableHash64), so the same request id with
  // the same parameters samples the same tokens on every run and machine. Supply a seed to make
  // samples independent of the id.
  absl::optional<std::uint64_t> seed;
  // Parent of the first KV block's chained hash: 0 for shared prefixes; a cache salt's root
  // (CacheSaltRoot) keeps the request's blocks apart from every other salt's, so requests of
  // different tenants never reuse, or time, each other's cached prefixes. Not a sampling
  // parameter, but it travels with them (the router's dispatch forwards them whole).
  std::uint64_t kv_hash_root = 0;
};

// Checks ranges (temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, repetition_penalty > 0,
// max_tokens >= 1, finite values) and that stop ids lie in [0, vocab_size).
absl::Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

// Token history of one request, as the penalties see it.
struct TokenHistory {
  std::span<const std::int32_t> prompt;
  std::span<const std::int32_t> generated;
};

// Applies repetition, presence and frequency penalties to `logits` in place.
void ApplyPenalties(const SamplingParams& params, const TokenHistory& history,
                    std::span<float> logits);

// Uniform double in [0, 1) for draw number `draw_index` of a request seeded with `seed`.
// Counter-based (a pure function of both), so a request's samples do not depend on which batch
// it ran in, on preemption, or on other requests.
double UniformForDraw(std::uint64_t seed, std::uint64_t draw_index);

// Chooses the next token from raw logits. Pipeline: penalties -> (temperature 0: argmax) ->
// logits / temperature -> top_k -> softmax -> top_p -> min_p -> inverse-CDF draw with
// UniformForDraw(seed, draw_index) over the kept tokens in descending-probability order (id order
// when no top_k/top_p/min_p filter is active, which needs no sort).
// `logits` is used as scratch and left modified.
std::int32_t SampleToken(const SamplingParams& params, std::uint64_t seed,
                         std::uint64_t draw_index, const TokenHistory& history,
                         std::span<float> logits);

// The probabilities SampleToken draws from (after every filter), indexed by token id; tokens that
// were filtered out get 0. Exposed so tests can check the filters without statistics.
std::vector<double> SamplingDistribution(const SamplingParams& params, const TokenHistory& history,
                                         std::span<float> logits);

}  // namespace tandem::engine
