#include "bounds.h"

#include <algorithm>

#include "stats.h"

namespace tandem::sim {
namespace {

double Slowdown(const SimConfig& config, int worker) {
  return config.prefill_slowdown.empty() ? 1.0 : config.prefill_slowdown[worker];
}

double ComputeSeconds(const SimConfig& config, std::int64_t miss, double slowdown) {
  return config.prefill_overhead_seconds +
         static_cast<double>(miss) * config.prefill_seconds_per_token * slowdown;
}

double HandoffSeconds(const SimConfig& config, const TraceRequest& r) {
  return static_cast<double>(r.chain.size()) * config.kv_transfer_seconds_per_block;
}

}  // namespace

double TtftP90Floor(const Trace& trace, const SimConfig& config,
                    const std::vector<std::int64_t>& misses) {
  double fastest = Slowdown(config, 0);
  for (int p = 1; p < config.prefill_workers; ++p) fastest = std::min(fastest, Slowdown(config, p));
  std::vector<double> ttft;
  ttft.reserve(misses.size());
  for (std::size_t i = 0; i < misses.size(); ++i) {
    ttft.push_back(ComputeSeconds(config, misses[i], fastest) +
                   HandoffSeconds(config, trace.requests[i]));
  }
  return Percentile(ttft, 0.90);
}

double TtftP90Oracle(const Trace& trace, const SimConfig& config,
                     const std::vector<std::int64_t>& misses) {
  std::vector<double> free_at(static_cast<std::size_t>(std::max(config.prefill_workers, 1)), 0.0);
  std::vector<double> ttft;
  ttft.reserve(misses.size());
  for (std::size_t i = 0; i < misses.size(); ++i) {
    const double arrival = trace.requests[i].arrival_seconds / config.speedup;
    double best_end = 0;
    std::size_t best = 0;
    for (std::size_t w = 0; w < free_at.size(); ++w) {
      const double end = std::max(free_at[w], arrival) +
                         ComputeSeconds(config, misses[i], Slowdown(config, static_cast<int>(w)));
      if (w == 0 || end < best_end) {
        best_end = end;
        best = w;
      }
    }
    free_at[best] = best_end;
    ttft.push_back(best_end + HandoffSeconds(config, trace.requests[i]) - arrival);
  }
  return Percentile(ttft, 0.90);
}

}  // namespace tandem::sim
