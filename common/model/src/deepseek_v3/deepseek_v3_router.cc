#include "deepseek_v3/deepseek_v3_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace tandem::model::internal {

void RouteToken(const DeepseekV3Config& config, std::span<const float> logits,
                std::span<const float> bias, std::span<int> experts, std::span<float> weights) {
  const int n = config.n_routed_experts;
  const int per_group = n / config.n_group;
  std::vector<float> scores(n), choice(n);
  for (int e = 0; e < n; ++e) {
    scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    choice[e] = scores[e] + bias[e];
  }
  // Group score: sum of the group's two best biased scores (one when a group has one expert).
  std::vector<float> group_score(config.n_group);
  for (int g = 0; g < config.n_group; ++g) {
    std::vector<float> members(choice.begin() + g * per_group,
                               choice.begin() + (g + 1) * per_group);
    const int take = std::min(2, per_group);
    std::partial_sort(members.begin(), members.begin() + take, members.end(), std::greater<>());
    group_score[g] = std::accumulate(members.begin(), members.begin() + take, 0.0f);
  }
  std::vector<int> groups(config.n_group);
  std::iota(groups.begin(), groups.end(), 0);
  // Ties break toward the lower index, as torch.topk does on CPU for distinct inputs.
  auto by_score = [](const std::vector<float>& s) {
    return [&s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
  };
  std::partial_sort(groups.begin(), groups.begin() + config.topk_group, groups.end(),
                    by_score(group_score));
  std::vector<float> masked(n, -std::numeric_limits<float>::infinity());
  for (int i = 0; i < config.topk_group; ++i) {
    const int g = groups[i];
    std::copy(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group,
              masked.begin() + g * per_group);
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const int k = config.num_experts_per_tok;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), by_score(masked));
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) {
    experts[i] = order[i];
    weights[i] = scores[order[i]];
    sum += weights[i];
  }
  for (int i = 0; i < k; ++i) {
    if (config.norm_topk_prob) weights[i] /= sum + 1e-20f;
    weights[i] *= config.routed_scaling_factor;
  }
}

}  // namespace tandem::model::internal
