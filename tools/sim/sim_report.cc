#include "nlohmann/json.hpp"
#include "simulator.h"

namespace tandem::sim {

std::string ToJson(const SimResult& r) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["requests"] = r.requests;
  j["hit_rate"] = r.hit_rate;
  j["hit_rate_bound"] = r.hit_rate_bound;
  j["ttft_p50"] = r.ttft_p50;
  j["ttft_p90"] = r.ttft_p90;
  j["ttft_p99"] = r.ttft_p99;
  j["ttft_p90_floor"] = r.ttft_p90_floor;
  j["ttft_p90_oracle"] = r.ttft_p90_oracle;
  j["held"] = r.held;
  j["itl_p50"] = r.itl_p50;
  j["itl_p99"] = r.itl_p99;
  j["imbalance_max"] = r.imbalance_max;
  j["imbalance_mean"] = r.imbalance_mean;
  j["simulated_seconds"] = r.simulated_seconds;
  j["index_gaps"] = r.index_gaps;
  j["warm_ups"] = r.warm_ups;
  j["warm_up_tokens"] = r.warm_up_tokens;
  j["held_moves"] = r.held_moves;
  j["prefill_pieces"] = r.prefill_pieces;
  return j.dump();
}

}  // namespace tandem::sim
