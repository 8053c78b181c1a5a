// Routing decision latency: every policy's Route() (plus the index Touch the router does after it)
// at 64 workers over a KV index of 1M blocks, per-decision p50/p99/max; and KV event ingest rate.
//   build-x/tests/perf/tandem_routing_decision_bench [--blocks N] [--chain N] [--decisions N]
// Target (the prefix-affinity routing issue): p99 < 50 us at 64 workers and 1M indexed blocks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tandem/routing/kv_index.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::size_t blocks = 1 << 20;  // indexed blocks
  int chain = 64;                // blocks per request
  int decisions = 200000;
  int prefill_workers = 48;      // 64 workers in all
  int decode_workers = 16;
};

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Conversations of `chain` blocks, each cached on 1-3 prefill workers, until `blocks` are indexed.
std::vector<std::vector<BlockHash>> Populate(const Options& o, KvIndex& index, std::mt19937_64& rng) {
  std::vector<std::vector<BlockHash>> conversations;
  std::uniform_int_distribution<int> worker(0, o.prefill_workers - 1);
  std::uniform_int_distribution<int> copies(1, 3);
  std::vector<std::uint64_t> seq(o.prefill_workers, 0);
  BlockHash next_hash = 1;
  const auto start = Clock::now();
  std::size_t events = 0;
  while (index.size() + o.chain <= o.blocks) {
    std::vector<BlockHash> chain(o.chain);
    for (BlockHash& h : chain) h = next_hash++ * 0x9e3779b97f4a7c15ULL;
    for (int c = copies(rng); c > 0; --c) {
      const int w = worker(rng);
      KvEvent e;
      e.seq = ++seq[w];
      e.kind = KvEvent::Kind::kStored;
      e.block_hashes = chain;
      if (!index.Apply(w, e).ok()) std::abort();
      ++events;
    }
    conversations.push_back(std::move(chain));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("ingest: %zu stored events of %d blocks in %.2f s = %.0f blocks/s; index %zu blocks\n",
              events, o.chain, seconds, static_cast<double>(events) * o.chain / seconds,
              index.size());
  return conversations;
}

int Run(const Options& o) {
  std::mt19937_64 rng(12345);
  KvIndex index(KvIndex::Options{.max_blocks = o.blocks});
  WorkerTable table;
  for (int w = 0; w < o.prefill_workers; ++w) {
    if (!table.Add(w, Role::kPrefill).ok() || !index.AddWorker(w, 1).ok()) return 1;
  }
  for (int d = 0; d < o.decode_workers; ++d) {
    if (!table.Add(o.prefill_workers + d, Role::kDecode).ok()) return 1;
  }
  const std::vector<std::vector<BlockHash>> conversations = Populate(o, index, rng);
  // Some load everywhere, so no policy short-circuits on an idle cluster.
  std::uniform_int_distribution<int> load(0, 8);
  for (int w = 0; w < o.prefill_workers + o.decode_workers; ++w) {
    for (int i = load(rng); i > 0; --i) {
      if (w < o.prefill_workers) {
        table.OnPrefillDispatched(w, 2000, 100, 0.0);
      } else {
        table.OnDecodeDispatched(w, 100);
      }
    }
  }
  // Requests: a known conversation's prefix of random length, then new blocks.
  std::vector<std::vector<BlockHash>> requests(4096);
  std::uniform_int_distribution<std::size_t> pick(0, conversations.size() - 1);
  std::uniform_int_distribution<int> shared(0, o.chain);
  for (auto& r : requests) {
    const auto& c = conversations[pick(rng)];
    const int keep = shared(rng);
    r.assign(c.begin(), c.begin() + keep);
    while (static_cast<int>(r.size()) < o.chain) r.push_back(rng());
  }
  std::printf("decisions: %d per policy, %d prefill + %d decode workers, %d-block chains\n",
              o.decisions, o.prefill_workers, o.decode_workers, o.chain);
  std::string over;
  for (const std::string& name : PolicyNames()) {
    auto policy = MakePolicy(name);
    if (!policy.ok()) return 1;
    std::vector<double> us;
    us.reserve(o.decisions);
    for (int i = 0; i < o.decisions; ++i) {
      const auto& chain = requests[i % requests.size()];
      const RouteRequest request{.block_hashes = chain,
                                 .prompt_tokens = static_cast<std::int64_t>(chain.size()) * 16,
                                 .block_size = 16,
                                 .max_output_tokens = 256};
      const auto start = Clock::now();
      absl::StatusOr<RouteDecision> d = (*policy)->Route(
          request, ClusterView{.index = &index, .workers = table.states(), .now_seconds = 1.0});
      index.Touch(chain);
      us.push_back(Micros(Clock::now() - start));
      if (!d.ok()) return 1;
    }
    const double p99 = Percentile(us, 0.99);
    if (p99 >= 50) over += " " + name;
    std::printf("%-20s p50 %6.2f us  p99 %6.2f us  max %8.2f us\n", name.c_str(),
                Percentile(us, 0.50), p99, *std::max_element(us.begin(), us.end()));
  }
  std::printf("policies at or over p99 50 us:%s\n", over.empty() ? " none" : over.c_str());
  return 0;
}

}  // namespace
}  // namespace tandem::routing

int main(int argc, char** argv) {
  tandem::routing::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--blocks") == 0) o.blocks = static_cast<std::size_t>(v);
    else if (std::strcmp(argv[i], "--chain") == 0) o.chain = static_cast<int>(v);
    else if (std::strcmp(argv[i], "--decisions") == 0) o.decisions = static_cast<int>(v);
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--chain N] [--decisions N]\n", argv[0]);
      return 2;
    }
  }
  if (o.blocks < 1 || o.chain < 1 || o.decisions < 1) {
    std::fprintf(stderr, "values must be positive\n");
    return 2;
  }
  return tandem::routing::Run(o);
}
