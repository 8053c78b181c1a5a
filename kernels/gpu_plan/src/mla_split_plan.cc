#include "tandem/gpu_plan/mla_split_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem::gpu_plan {

absl::StatusOr<MlaSplitPlan> PlanMlaSplit(std::span<const int> kv_lens,
                                          const MlaSplitOptions& options) {
  if (options.block_size <= 0 || options.chunk_blocks <= 0 || options.num_ctas <= 0 ||
      options.chunk_overhead_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MLA split options need positive sizes: block_size ", options.block_size,
        ", chunk_blocks ", options.chunk_blocks, ", num_ctas ", options.num_ctas,
        ", chunk_overhead_tokens ", options.chunk_overhead_tokens));
  }
  const std::int64_t chunk_tokens =
      static_cast<std::int64_t>(options.block_size) * options.chunk_blocks;
  if (chunk_tokens > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("MLA chunk of ", chunk_tokens, " tokens"));
  }
  MlaSplitPlan plan;
  plan.chunk_tokens = static_cast<int>(chunk_tokens);
  plan.seq_chunk_begin.reserve(kv_lens.size() + 1);
  plan.seq_chunk_begin.push_back(0);
  std::int64_t total_cost = 0;
  for (std::size_t b = 0; b < kv_lens.size(); ++b) {
    const int len = kv_lens[b];
    if (len <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", b, " has ", len, " KV tokens; decode needs at least 1"));
    }
    for (int begin = 0, i = 0; begin < len; begin += plan.chunk_tokens, ++i) {
      const int end = static_cast<int>(std::min<std::int64_t>(len, begin + chunk_tokens));
      plan.chunks.push_back(MlaChunk{static_cast<int>(b), i, begin, end});
      total_cost += (end - begin) + options.chunk_overhead_tokens;
    }
    plan.seq_chunk_begin.push_back(static_cast<int>(plan.chunks.size()));
  }
  // Contiguous runs of chunks, each CTA taking chunks until its share of the total cost is
  // reached: neighbouring chunks of a sequence mostly land on one CTA, and a CTA's load exceeds
  // the even share by less than one chunk.
  plan.cta_chunk_begin.assign(options.num_ctas + 1, static_cast<int>(plan.chunks.size()));
  plan.cta_chunk_begin[0] = 0;
  std::int64_t done = 0;
  std::size_t next = 0;
  for (int c = 0; c < options.num_ctas; ++c) {
    plan.cta_chunk_begin[c] = static_cast<int>(next);
    const std::int64_t target = total_cost * (c + 1) / options.num_ctas;
    while (next < plan.chunks.size() && done < target) {
      done += (plan.chunks[next].kv_end - plan.chunks[next].kv_begin) +
              options.chunk_overhead_tokens;
      ++next;
    }
  }
  return plan;
}

void CombineChunkPartials(std::span<const float> partials, std::span<const float> lses, int dim,
                          std::span<float> out) {
  const std::size_t n = lses.size();
  float m = -INFINITY;
  for (float l : lses) m = std::max(m, l);
  float sum = 0.0f;
  for (float l : lses) sum += std::exp(l - m);
  const float lse = m + std::log(sum);
  std::fill(out.begin(), out.begin() + dim, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    // One chunk: lse == lse_0 bit for bit (log(exp(0)) == 0), so the weight is exactly 1.
    const float w = std::exp(lses[i] - lse);
    for (int d = 0; d < dim; ++d) out[d] += w * partials[i * dim + d];
  }
}

}  // namespace tandem::gpu_plan
