#include "tandem/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace tandem::engine {
namespace {

std::uint64_t SplitMix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct Candidate {
  std::int32_t token;
  double prob;
};

std::int32_t Argmax(std::span<const float> logits) {
  std::int32_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<std::int32_t>(i);  // strict: first wins ties
  }
  return best;
}

// The tokens that survive every filter with their renormalised probabilities: most likely first
// (ties: lower id first) when a filter is active, else in id order. Assumes temperature > 0 and
// penalties already applied.
std::vector<Candidate> FilteredCandidates(const SamplingParams& params, std::span<float> logits) {
  const auto vocab = static_cast<std::int32_t>(logits.size());
  // NaN would break the sort's ordering; treat it as impossible.
  for (float& l : logits) {
    if (std::isnan(l)) l = -std::numeric_limits<float>::infinity();
  }
  std::vector<std::int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](std::int32_t a, std::int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  bool sorted = true;
  if (params.top_k > 0 && params.top_k < vocab) {
    std::partial_sort(order.begin(), order.begin() + params.top_k, order.end(), more_likely);
    order.resize(params.top_k);
  } else if (params.top_p < 1.0f || params.min_p > 0.0f) {
    std::sort(order.begin(), order.end(), more_likely);
  } else {
    // No filter: the draw walks the vocabulary in id order. Same distribution, without an
    // O(V log V) sort per token on 100k+ vocabularies.
    sorted = false;
  }
  const std::int32_t best = sorted ? order[0] : Argmax(logits);

  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  const double max_scaled = static_cast<double>(logits[best]) * inv_t;
  std::vector<Candidate> out;
  out.reserve(order.size());
  double total = 0.0;
  for (std::int32_t t : order) {
    const double p = std::exp(static_cast<double>(logits[t]) * inv_t - max_scaled);
    out.push_back({t, p});
    total += p;
  }
  if (!(total > 0.0) || !std::isfinite(total)) {
    // Every logit was -inf (or the max was +inf): fall back to the single most likely token.
    return {{best, 1.0}};
  }
  for (Candidate& c : out) c.prob /= total;

  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    std::size_t n = 0;
    while (n < out.size() && (n == 0 || cumulative < params.top_p)) cumulative += out[n++].prob;
    out.resize(n);
  }
  if (params.min_p > 0.0f) {
    const double threshold = static_cast<double>(params.min_p) * out.front().prob;
    std::erase_if(out, [&](const Candidate& c) { return c.prob < threshold; });
  }
  double kept = 0.0;
  for (const Candidate& c : out) kept += c.prob;
  for (Candidate& c : out) c.prob /= kept;
  return out;
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int vocab_size) {
  auto bad = [](absl::string_view field, double v, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(field, " = ", v, " is invalid: ", rule));
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    return bad("temperature", p.temperature, "must be finite and >= 0");
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p", p.top_p, "must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p", p.min_p, "must be in [0, 1]");
  if (p.top_k < 0) return bad("top_k", p.top_k, "must be >= 0 (0 disables it)");
  if (!std::isfinite(p.presence_penalty)) {
    return bad("presence_penalty", p.presence_penalty, "must be finite");
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return bad("frequency_penalty", p.frequency_penalty, "must be finite");
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0f) {
    return bad("repetition_penalty", p.repetition_penalty, "must be finite and > 0");
  }
  if (p.max_tokens < 1) return bad("max_tokens", p.max_tokens, "must be >= 1");
  for (std::int32_t t : p.stop_token_ids) {
    if (t < 0 || t >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_token_ids contains ", t, ", outside the vocabulary [0, ", vocab_size,
                       ")"));
    }
  }
  return absl::OkStatus();
}

void ApplyPenalties(const SamplingParams& params, const TokenHistory& history,
                    std::span<float> logits) {
  const auto in_vocab = [&](std::int32_t t) {
    return t >= 0 && static_cast<std::size_t>(t) < logits.size();
  };
  if (params.repetition_penalty != 1.0f) {
    absl::flat_hash_set<std::int32_t> seen;
    for (auto part : {history.prompt, history.generated}) {
      for (std::int32_t t : part) {
        if (!in_vocab(t) || !seen.insert(t).second) continue;
        float& l = logits[t];
        l = l > 0.0f ? l / params.repetition_penalty : l * params.repetition_penalty;
      }
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    absl::flat_hash_map<std::int32_t, int> counts;
    for (std::int32_t t : history.generated) {
      if (in_vocab(t)) ++counts[t];
    }
    for (const auto& [t, n] : counts) {
      logits[t] -= params.presence_penalty + params.frequency_penalty * static_cast<float>(n);
    }
  }
}

double UniformForDraw(std::uint64_t seed, std::uint64_t draw_index) {
  const std::uint64_t bits = SplitMix64(seed ^ SplitMix64(draw_index));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

std::int32_t SampleToken(const SamplingParams& params, std::uint64_t seed,
                         std::uint64_t draw_index, const TokenHistory& history,
                         std::span<float> logits) {
  ApplyPenalties(params, history, logits);
  if (params.temperature == 0.0f) return Argmax(logits);
  const std::vector<Candidate> kept = FilteredCandidates(params, logits);
  const double u = UniformForDraw(seed, draw_index);
  double cumulative = 0.0;
  for (const Candidate& c : kept) {
    cumulative += c.prob;
    if (u < cumulative) return c.token;
  }
  return kept.back().token;  // u fell in the rounding gap at the top
}

std::vector<double> SamplingDistribution(const SamplingParams& params, const TokenHistory& history,
                                         std::span<float> logits) {
  ApplyPenalties(params, history, logits);
  std::vector<double> dist(logits.size(), 0.0);
  if (params.temperature == 0.0f) {
    dist[Argmax(logits)] = 1.0;
    return dist;
  }
  for (const Candidate& c : FilteredCandidates(params, logits)) dist[c.token] = c.prob;
  return dist;
}

}  // namespace tandem::engine
