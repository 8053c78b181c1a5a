// tandem-sim --trace FILE --prefill-workers N --decode-workers M --policy NAME [--policy NAME...]
//            [--capacity-blocks B] [--speedup S] [--block-size T] [--decode-capacity-blocks B]
//            [--prefill-slowdown F1,F2,...] [--tandem KEY=VALUE ...]
//            [--prefill-hold-depth N] [--prefill-hold-aging X] [--hold-every-policy 0|1]
//            [--warm-ups 0|1] [--warm-up-min-waits X] [--warm-up-min-blocks N]
//            [--warm-up-decay-s X]
//            [cost model: --prefill-overhead-s X --prefill-s-per-token X
//             --kv-transfer-s-per-block X --decode-base-s X --decode-per-seq-s X
//             --decode-per-block-s X]
// Prints one JSON object per policy, one per line; malformed trace lines go to stderr.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "simulator.h"
#include "trace.h"

namespace {

constexpr char kUsage[] =
    "usage: tandem-sim --trace FILE --prefill-workers N --decode-workers M --policy NAME\n"
    "                  [--policy NAME ...] [--capacity-blocks B] [--speedup S] [--block-size T]\n"
    "                  [--decode-capacity-blocks B] [--prefill-slowdown F1,F2,...]\n"
    "                  [--warm-ups 0|1] [--warm-up-min-waits X] [--warm-up-min-blocks N]\n"
    "                  [--warm-up-decay-s X]\n"
    "                  [--tandem own_work_weight=X|cache_stickiness=X|history_stickiness=X|\n"
    "                            shared_prefix_seconds=X|full_stickiness_reused_share=X|\n"
    "                            branch_stickiness_floor=X|tail_guard_quantile=X|\n"
    "                            tail_guard_window=N|\n"
    "                            displaced_history_stickiness=X|idle_wait_weight=X|\n"
    "                            idle_wait_fan_out=X|idle_wait_fan_out_offset=X|\n"
    "                            displaced_history_idle_scale=X|\n"
    "                            track_pending=0|1|\n"
    "                            max_in_flight_spread=N|\n"
    "                            prior_prefill_seconds_per_token=X|\n"
    "                            prefill_overhead_seconds=X]\n"
    "                  [--prefill-hold-depth N] [--prefill-hold-aging X]  (tandem's hold queue)\n"
    "                  [--hold-every-policy 0|1]  (1: the baselines behind the same queue)\n"
    "                  [--prefill-piece-s X] [--prefill-piece-min N]  (tandem: a rest longer than "
    "N\n"
    "                                        pieces of X s goes in pieces; X 0: whole prompts)\n"
    "                  [--held-moves 0|1] [--held-move-weight X]  (tandem: idle workers take\n"
    "                                                             held prefills over)\n"
    "                  [--per-request PREFIX]  (PREFIX.POLICY.tsv: arrival, prompt, computed,\n"
    "                                           wait, TTFT, prefill worker, its leading run\n"
    "                                           on that worker and on the best one at\n"
    "                                           arrival, per request)\n"
    "                  [--prefill-overhead-s X] [--prefill-s-per-token X]\n"
    "                  [--kv-transfer-s-per-block X] [--decode-base-s X] [--decode-per-seq-s X]\n"
    "                  [--decode-per-block-s X]   (cost model, seconds; defaults in simulator.h)\n"
    "policies: round-robin least-load power-of-two sglang-cache-aware dynamo-cost tandem (or "
    "all)\n";

struct Args {
  std::string trace;
  std::vector<std::string> policies;
  tandem::sim::SimConfig config;
  tandem::routing::TandemOptions tandem;  // --tandem KEY=VALUE: for sensitivity runs
  std::string per_request;                // --per-request PREFIX: PREFIX.POLICY.tsv per policy
};

bool SetTandemOption(absl::string_view assignment, tandem::routing::TandemOptions* o) {
  const std::vector<std::string> kv = absl::StrSplit(assignment, absl::MaxSplits('=', 1));
  double v;
  if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &v)) return false;
  if (kv[0] == "own_work_weight") o->own_work_weight = v;
  else if (kv[0] == "own_work_weight_per_queued") o->own_work_weight_per_queued = v;
  else if (kv[0] == "cache_stickiness") o->cache_stickiness = v;
  else if (kv[0] == "track_pending") o->track_pending = v != 0;
  else if (kv[0] == "shared_prefix_seconds") o->shared_prefix_seconds = v;
  else if (kv[0] == "history_stickiness") o->history_stickiness = v;
  else if (kv[0] == "full_stickiness_reused_share") o->full_stickiness_reused_share = v;
  else if (kv[0] == "idle_wait_weight") o->idle_wait_weight = v;
  else if (kv[0] == "branch_stickiness_floor")
    o->branch_stickiness_floor = v;
  else if (kv[0] == "tail_guard_quantile" && v >= 0 && v <= 1)
    o->tail_guard_quantile = v;
  else if (kv[0] == "tail_guard_window" && v >= 1 && v <= (1 << 20))
    o->tail_guard_window = static_cast<std::size_t>(v);
  else if (kv[0] == "idle_wait_fan_out") o->idle_wait_fan_out = v;
  else if (kv[0] == "idle_wait_fan_out_offset") o->idle_wait_fan_out_offset = v;
  else if (kv[0] == "displaced_history_idle_scale")
    o->displaced_history_idle_scale = v;
  else if (kv[0] == "prefill_overhead_seconds") o->prefill_overhead_seconds = v;
  else if (kv[0] == "displaced_history_stickiness") o->displaced_history_stickiness = v;
  else if (kv[0] == "max_in_flight_spread") o->max_in_flight_spread = static_cast<int>(v);
  else if (kv[0] == "prior_prefill_seconds_per_token") o->prior_prefill_seconds_per_token = v;
  else return false;
  return true;
}

bool Fail(const std::string& message) {
  std::cerr << "tandem-sim: " << message << "\n" << kUsage;
  return false;
}

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return Fail("help requested");
    if (i + 1 >= argc) return Fail(flag + " needs a value");
    const std::string value = argv[++i];
    auto as_int = [&](auto* out) {
      std::int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return Fail(flag + " takes an integer, not '" + value + "'");
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
      return true;
    };
    // Cost-model fields: a negative or non-finite cost would make simulated time run backwards.
    auto as_seconds = [&](double* out) {
      double v;
      if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || v < 0) {
        return Fail(flag + " takes a non-negative number of seconds, not '" + value + "'");
      }
      *out = v;
      return true;
    };
    tandem::sim::SimConfig& c = args->config;
    struct CostFlag {
      const char* name;
      double* field;
    };
    const CostFlag cost_flags[] = {
        {"--prefill-overhead-s", &c.prefill_overhead_seconds},
        {"--prefill-s-per-token", &c.prefill_seconds_per_token},
        {"--kv-transfer-s-per-block", &c.kv_transfer_seconds_per_block},
        {"--decode-base-s", &c.decode_base_seconds},
        {"--decode-per-seq-s", &c.decode_per_sequence_seconds},
        {"--decode-per-block-s", &c.decode_per_block_seconds},
    };
    const CostFlag* cost_flag = nullptr;
    for (const CostFlag& f : cost_flags) {
      if (flag == f.name) cost_flag = &f;
    }
    if (cost_flag != nullptr) {
      if (!as_seconds(cost_flag->field)) return false;
      continue;
    }
    if (flag == "--trace") {
      args->trace = value;
    } else if (flag == "--policy") {
      if (value == "all") {
        for (const std::string& name : tandem::routing::PolicyNames()) args->policies.push_back(name);
      } else {
        args->policies.push_back(value);
      }
    } else if (flag == "--prefill-workers") {
      if (!as_int(&c.prefill_workers)) return false;
    } else if (flag == "--decode-workers") {
      if (!as_int(&c.decode_workers)) return false;
    } else if (flag == "--capacity-blocks") {
      if (!as_int(&c.capacity_blocks)) return false;
    } else if (flag == "--decode-capacity-blocks") {
      if (!as_int(&c.decode_capacity_blocks)) return false;
    } else if (flag == "--block-size") {
      if (!as_int(&c.block_size)) return false;
    } else if (flag == "--prefill-hold-depth") {
      if (!as_int(&c.prefill_hold_depth)) return false;
    } else if (flag == "--prefill-hold-aging") {
      if (!absl::SimpleAtod(value, &c.prefill_hold_aging)) {
        return Fail("--prefill-hold-aging takes a number");
      }
    } else if (flag == "--per-request") {
      args->per_request = value;
    } else if (flag == "--warm-up-min-waits") {
      if (!absl::SimpleAtod(value, &c.warm_up.min_waits)) {
        return Fail("--warm-up-min-waits takes a number");
      }
    } else if (flag == "--warm-up-min-blocks") {
      if (!as_int(&c.warm_up.min_blocks)) return false;
    } else if (flag == "--warm-up-decay-s") {
      if (!as_seconds(&c.warm_up.waits_decay_seconds)) return false;
    } else if (flag == "--warm-ups") {
      if (value != "0" && value != "1") return Fail("--warm-ups takes 0 or 1");
      c.warm_up.enabled = value == "1";
    } else if (flag == "--held-moves") {
      if (value != "0" && value != "1") return Fail("--held-moves takes 0 or 1");
      c.held_moves.enabled = value == "1";
    } else if (flag == "--prefill-piece-s") {
      if (!absl::SimpleAtod(value, &c.pieces.piece_seconds) || !(c.pieces.piece_seconds >= 0)) {
        return Fail("--prefill-piece-s takes a non-negative number (0: whole prompts)");
      }
    } else if (flag == "--prefill-piece-min") {
      if (!absl::SimpleAtod(value, &c.pieces.min_pieces) || !(c.pieces.min_pieces >= 1)) {
        return Fail("--prefill-piece-min takes a number >= 1");
      }
    } else if (flag == "--held-move-weight") {
      if (!absl::SimpleAtod(value, &c.held_moves.extra_compute_weight) ||
          !(c.held_moves.extra_compute_weight >= 0)) {
        return Fail("--held-move-weight takes a non-negative number");
      }
    } else if (flag == "--hold-every-policy") {
      if (value != "0" && value != "1") return Fail("--hold-every-policy takes 0 or 1");
      c.hold_every_policy = value == "1";
    } else if (flag == "--speedup") {
      if (!absl::SimpleAtod(value, &c.speedup)) return Fail("--speedup takes a number");
    } else if (flag == "--prefill-slowdown") {
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        double f;
        if (!absl::SimpleAtod(part, &f)) {
          return Fail("--prefill-slowdown takes numbers, comma-separated");
        }
        c.prefill_slowdown.push_back(f);
      }
    } else if (flag == "--tandem") {
      if (!SetTandemOption(value, &args->tandem)) return Fail("bad --tandem option '" + value + "'");
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  if (args->trace.empty()) return Fail("--trace is required");
  if (args->policies.empty()) return Fail("at least one --policy is required");
  return true;
}

// arrival, prompt tokens, computed tokens, wait, TTFT, prefill worker: one request a line.
bool WriteRecords(const std::string& path, const std::vector<tandem::sim::RequestRecord>& records) {
  std::ofstream out(path);
  for (const tandem::sim::RequestRecord& r : records) {
    out << r.arrival << '\t' << r.prompt_tokens << '\t' << r.computed_tokens << '\t' << r.wait
        << '\t' << r.ttft << '\t' << r.prefill_worker << '\t' << r.chosen_cached_blocks << '\t'
        << r.best_cached_blocks << '\n';
  }
  if (!out) std::cerr << "tandem-sim: cannot write " << path << "\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  absl::StatusOr<tandem::sim::Trace> trace =
      tandem::sim::ReadTraceFile(args.trace, args.config.block_size);
  if (!trace.ok()) {
    std::cerr << "tandem-sim: " << trace.status().message() << "\n";
    return 1;
  }
  for (const std::string& why : trace->skipped) {
    std::cerr << "tandem-sim: " << args.trace << " " << why << " (skipped)\n";
  }
  if (trace->requests.empty()) {
    std::cerr << "tandem-sim: no usable requests in " << args.trace << "\n";
    return 1;
  }
  for (const std::string& name : args.policies) {
    absl::StatusOr<std::unique_ptr<tandem::routing::Policy>> policy =
        name == "tandem" ? tandem::routing::MakeTandemPolicy(args.tandem)
                         : tandem::routing::MakePolicy(name);
    if (!policy.ok()) {
      std::cerr << "tandem-sim: " << policy.status().message() << "\n";
      return 2;
    }
    std::vector<tandem::sim::RequestRecord> records;
    tandem::sim::SimConfig config = args.config;
    // Moves judge held prefills with the policy's own cost terms, as the router sets them.
    config.held_moves.prefill_overhead_seconds = args.tandem.prefill_overhead_seconds;
    config.held_moves.prior_prefill_seconds_per_token = args.tandem.prior_prefill_seconds_per_token;
    if (!args.per_request.empty()) config.per_request = &records;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<tandem::sim::SimResult> result = tandem::sim::Simulate(*trace, config, **policy);
    if (!result.ok()) {
      std::cerr << "tandem-sim: " << name << ": " << result.status().message() << "\n";
      return 1;
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << tandem::sim::ToJson(*result) << std::endl;
    if (!args.per_request.empty() && !WriteRecords(args.per_request + "." + name + ".tsv", records)) {
      return 1;
    }
    std::cerr << "tandem-sim: " << name << " replayed " << result->simulated_seconds
              << " simulated s in " << wall << " s\n";
  }
  return 0;
}
