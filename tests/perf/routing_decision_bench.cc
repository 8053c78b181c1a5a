// Routing decision latency at 64 workers over a KV index of exactly 1M blocks, per decision
// p50/p99/max:
//  - the router's whole decision (PrefixRouter::Choose with the default tandem policy: hashing the
//    prompt's tokens into chained block hashes, the lock, the policy, the index Touch, dispatch
//    accounting), its index fed through the router's KV event path (tandem.v1.KvEventBatch);
//  - every policy's Route() plus the Touch, on the bare index;
//  - the reference, measured in the same run on the same requests: the leading-run lookup of each
//    request's chain in a plain absl::flat_hash_map holding the same 1M hashes (the memory-bound
//    floor of any prefix-aware decision). Each figure is printed as a ratio to it, so runs on
//    machines of different speed or load compare;
//  - the share of the router's decision spent hashing the prompt (ChainedBlockHashesInto alone).
//   build-x/tests/perf/tandem_routing_decision_bench [--blocks N] [--chain N] [--decisions N]
//                                                     [--gap-us N]
// Decisions run back to back by default, which keeps the index's recently used memory in cache;
// --gap-us sleeps between decisions, as a router with sparse traffic does, so that they find it
// evicted by whatever else ran meanwhile.
// Target (the prefix-affinity routing issue): p99 < 50 us at 64 workers and 1M indexed blocks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grpcpp/create_channel.h"
#include "workers/prefix_router.h"
#include "tandem/base/hash.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBlockTokens = 16;

struct Options {
  std::size_t blocks = 1 << 20;  // indexed blocks, exactly
  int chain = 64;                // blocks per request
  int decisions = 200000;
  int prefill_workers = 48;      // 64 workers in all
  int decode_workers = 16;
  int gap_us = 0;                // sleep between decisions
};

void Gap(const Options& o) {
  if (o.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.gap_us));
}

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};
Latency Summarize(const std::vector<double>& us) {
  return {Percentile(us, 0.50), Percentile(us, 0.99), *std::max_element(us.begin(), us.end())};
}

// Conversations are token sequences of `chain` blocks; their chained hashes are what the workers
// publish. Each is cached on 1-3 prefill workers; the last one is cut so that exactly `blocks`
// distinct blocks are indexed.
struct Corpus {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::vector<BlockHash>> hashes;
  std::vector<std::vector<int>> holders;
};

Corpus MakeCorpus(const Options& o, const router::PrefixRouter& hasher, std::mt19937_64& rng) {
  Corpus c;
  std::uniform_int_distribution<int> token(3, 511), worker(0, o.prefill_workers - 1), copies(1, 3);
  std::size_t total = 0;
  while (total < o.blocks) {
    const std::size_t n = std::min<std::size_t>(o.chain, o.blocks - total);
    std::vector<std::int32_t> t(n * kBlockTokens);
    for (auto& x : t) x = token(rng);
    c.hashes.push_back(hasher.BlockHashes(t));
    c.tokens.push_back(std::move(t));
    std::vector<int> h;
    for (int k = copies(rng); k > 0; --k) h.push_back(worker(rng));
    c.holders.push_back(std::move(h));
    total += n;
  }
  return c;
}

// A request: a known conversation's prefix of random length, then new tokens.
struct Request {
  std::vector<std::int32_t> tokens;
  std::vector<BlockHash> hashes;
};

std::vector<Request> MakeRequests(const Options& o, const Corpus& c,
                                  const router::PrefixRouter& hasher, std::mt19937_64& rng) {
  std::vector<Request> requests(4096);
  std::uniform_int_distribution<std::size_t> pick(0, c.tokens.size() - 1);
  std::uniform_int_distribution<int> shared(0, o.chain), token(3, 511);
  for (Request& r : requests) {
    const auto& conv = c.tokens[pick(rng)];
    const std::size_t keep =
        std::min(conv.size(), static_cast<std::size_t>(shared(rng)) * kBlockTokens);
    r.tokens.assign(conv.begin(), conv.begin() + static_cast<std::ptrdiff_t>(keep));
    while (r.tokens.size() < static_cast<std::size_t>(o.chain) * kBlockTokens) {
      r.tokens.push_back(token(rng));
    }
    r.hashes = hasher.BlockHashes(r.tokens);
  }
  return requests;
}

void Print(const char* name, const Latency& l, const Latency& reference) {
  std::printf("%-22s p50 %7.2f us  p99 %7.2f us  max %8.2f us  p99 = %5.1fx reference%s\n", name,
              l.p50, l.p99, l.max, l.p99 / reference.p99, l.p99 < 50 ? "" : "  (over 50 us)");
}

// The floor: each request's leading run in a plain hash map of the same blocks.
Latency MeasureReference(const Options& o, const Corpus& c, const std::vector<Request>& requests) {
  absl::flat_hash_map<BlockHash, WorkerMask> map;
  map.reserve(o.blocks);
  for (std::size_t i = 0; i < c.hashes.size(); ++i) {
    WorkerMask owners = 0;
    for (int w : c.holders[i]) owners |= SlotBit(w);
    for (BlockHash h : c.hashes[i]) map[h] = owners;
  }
  std::vector<double> us;
  us.reserve(o.decisions);
  std::size_t sink = 0;
  for (int i = 0; i < o.decisions; ++i) {
    const auto& chain = requests[i % requests.size()].hashes;
    const auto start = Clock::now();
    WorkerMask alive = ~WorkerMask{0};
    std::size_t run = 0;
    for (BlockHash h : chain) {
      auto it = map.find(h);
      if (it == map.end() || (alive &= it->second) == 0) break;
      ++run;
    }
    us.push_back(Micros(Clock::now() - start));
    sink += run;
    Gap(o);
  }
  if (sink == 0) std::printf("(no request matched anything)\n");
  return Summarize(us);
}

// The router's own decision path, fed through its KV event path.
int MeasureRouter(const Options& o, const Corpus& c, const std::vector<Request>& requests,
                  router::PrefixRouter& router, std::mt19937_64& rng, const Latency& reference) {
  const int workers = o.prefill_workers + o.decode_workers;
  router::PrefixRouter::Candidates candidates;
  for (int w = 0; w < workers; ++w) {
    v1::WorkerInfo info;
    info.set_worker_id("w" + std::to_string(w));
    info.set_role(w < o.prefill_workers ? v1::WORKER_ROLE_PREFILL : v1::WORKER_ROLE_DECODE);
    info.set_incarnation(1);
    if (!router.OnRegistered(info).ok()) return 1;
    auto entry = std::make_shared<router::WorkerEntry>(
        info, grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
    (w < o.prefill_workers ? candidates.prefill : candidates.decode).push_back({entry});
  }
  std::vector<std::uint64_t> seq(workers, 0);
  const auto ingest_start = Clock::now();
  std::size_t ingested = 0;
  for (std::size_t i = 0; i < c.hashes.size(); ++i) {
    for (int w : c.holders[i]) {
      v1::KvEventBatch batch;
      batch.set_worker_id("w" + std::to_string(w));
      batch.set_incarnation(1);
      v1::KvEvent* e = batch.add_events();
      e->set_seq(++seq[w]);
      e->mutable_stored()->set_tier(v1::KV_TIER_DEVICE);
      e->mutable_stored()->mutable_block_hashes()->Add(c.hashes[i].begin(), c.hashes[i].end());
      if (router.OnEvents(batch).resend_snapshot()) return 1;
      ingested += c.hashes[i].size();
    }
  }
  const double ingest_s = std::chrono::duration<double>(Clock::now() - ingest_start).count();
  std::printf("router ingest: %.0f blocks/s through KvEventBatch\n",
              static_cast<double>(ingested) / ingest_s);
  // Reported load everywhere, so the policy cannot short-circuit on an idle cluster.
  std::uniform_int_distribution<int> load(0, 8);
  for (int w = 0; w < workers; ++w) {
    v1::HeartbeatRequest hb;
    hb.set_worker_id("w" + std::to_string(w));
    hb.set_incarnation(1);
    hb.set_last_kv_event_seq(seq[w]);
    hb.mutable_load()->set_running_requests(load(rng));
    (void)router.OnHeartbeat(hb);
  }
  std::vector<double> us;
  us.reserve(o.decisions);
  v1::PrefillResponse answer;
  for (int i = 0; i < o.decisions; ++i) {
    const auto& tokens = requests[i % requests.size()].tokens;
    const auto start = Clock::now();
    auto choice = router.Choose(tokens, candidates, 256);
    us.push_back(Micros(Clock::now() - start));
    if (!choice.ok()) return 1;
    router.PrefillFinished(choice->prefill_ticket, &answer);
    router.DecodeFinished(choice->decode_ticket);
    Gap(o);
  }
  Print("router (tandem)", Summarize(us), reference);
  // The part of that decision spent hashing the prompt (outside the router's lock).
  std::vector<BlockHash> chain(static_cast<std::size_t>(o.chain));
  std::uint64_t sink = 0;
  us.clear();
  for (int i = 0; i < o.decisions; ++i) {
    const auto& tokens = requests[i % requests.size()].tokens;
    const auto start = Clock::now();
    sink += ChainedBlockHashesInto(tokens, kBlockTokens, 0, chain) > 0 ? chain.back() : 0;
    us.push_back(Micros(Clock::now() - start));
    Gap(o);
  }
  if (sink == 0) std::printf("(no prompt hashed)\n");
  Print(" of which prompt hash", Summarize(us), reference);
  return 0;
}

int Run(const Options& o) {
  std::mt19937_64 rng(12345);
  auto router = router::PrefixRouter::Create(
      {.block_size = kBlockTokens, .policy = "tandem", .max_index_blocks = o.blocks});
  if (!router.ok()) return 1;
  const Corpus corpus = MakeCorpus(o, **router, rng);
  const std::vector<Request> requests = MakeRequests(o, corpus, **router, rng);
  const std::string spacing =
      o.gap_us > 0 ? std::to_string(o.gap_us) + " us apart" : std::string("back to back");
  std::printf("%d prefill + %d decode workers, %zu indexed blocks, %d-block requests, %d decisions %s\n",
              o.prefill_workers, o.decode_workers, o.blocks, o.chain, o.decisions, spacing.c_str());
  const Latency reference = MeasureReference(o, corpus, requests);
  std::printf("%-22s p50 %7.2f us  p99 %7.2f us  max %8.2f us\n", "reference (hash map)",
              reference.p50, reference.p99, reference.max);
  if (MeasureRouter(o, corpus, requests, **router, rng, reference) != 0) return 1;
  router->reset();

  KvIndex index(KvIndex::Options{.max_blocks = o.blocks});
  WorkerTable table;
  for (int w = 0; w < o.prefill_workers; ++w) {
    if (!table.Add(w, Role::kPrefill).ok() || !index.AddWorker(w, 1).ok()) return 1;
  }
  for (int d = 0; d < o.decode_workers; ++d) {
    if (!table.Add(o.prefill_workers + d, Role::kDecode).ok()) return 1;
  }
  std::vector<std::uint64_t> seq(o.prefill_workers, 0);
  const auto start = Clock::now();
  for (std::size_t i = 0; i < corpus.hashes.size(); ++i) {
    for (int w : corpus.holders[i]) {
      KvEvent e;
      e.seq = ++seq[w];
      e.kind = KvEvent::Kind::kStored;
      e.block_hashes = corpus.hashes[i];
      if (!index.Apply(w, e).ok()) return 1;
    }
  }
  std::printf("index ingest: %.0f blocks/s (KvIndex::Apply); %zu blocks indexed\n",
              static_cast<double>(o.blocks) /
                  std::chrono::duration<double>(Clock::now() - start).count(),
              index.size());
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
  for (const std::string& name : PolicyNames()) {
    auto policy = MakePolicy(name);
    if (!policy.ok()) return 1;
    std::vector<double> us;
    us.reserve(o.decisions);
    for (int i = 0; i < o.decisions; ++i) {
      const auto& chain = requests[i % requests.size()].hashes;
      const RouteRequest request{.block_hashes = chain,
                                 .prompt_tokens = static_cast<std::int64_t>(chain.size()) * kBlockTokens,
                                 .block_size = kBlockTokens,
                                 .max_output_tokens = 256};
      const auto t0 = Clock::now();
      absl::StatusOr<RouteDecision> d = (*policy)->Route(
          request, ClusterView{.index = &index, .workers = table.states(), .now_seconds = 1.0});
      index.Touch(chain);
      us.push_back(Micros(Clock::now() - t0));
      if (!d.ok()) return 1;
      Gap(o);
    }
    Print(name.c_str(), Summarize(us), reference);
  }
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
    else if (std::strcmp(argv[i], "--gap-us") == 0) o.gap_us = static_cast<int>(v);
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--chain N] [--decisions N] [--gap-us N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (o.blocks < 1 || o.chain < 1 || o.decisions < 1 || o.gap_us < 0) {
    std::fprintf(stderr, "values must be positive\n");
    return 2;
  }
  return tandem::routing::Run(o);
}
