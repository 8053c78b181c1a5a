// llama-bench's two figures for any checkpoint tandem loads, on the fast CPU backend: pp (one
// prompt of N tokens in one forward, tokens/s) and tg (N greedy tokens at batch 1 from an empty
// cache, tokens/s), over `repeats` runs after one warm-up: the mean and stdev (as llama-bench
// reports them) and the best run (the least disturbed one on a shared machine), plus the tokens
// per CPU-second of the process (user + sys, all threads) of the best such run: on a machine
// shared with other work, wall time measures the share the engine got, CPU time its own cost
// (spinning or idle waits aside; the pool sleeps when idle). Drives Model::Forward directly (paged
// KV, nothing of the engine's scheduling), so it is the in-process counterpart of `llama-bench -p
// 512 -n 128 -t THREADS` (tests/perf/peers/engine_vs_peers.py runs both).
//
//   build-x/tests/perf/tandem_llama_bench MODEL_DIR [threads=2] [pp=512] [tg=128] [repeats=3]
//       [batch=1] [isa=auto] [layout=panels]   (batch > 1: tg also as `batch` streams decoding
//       together, total tokens/s; isa: the kernels' ISA copy, or "all" for each copy this CPU
//       runs; layout: the weights' MatMul layout, "amx" / "avx512bf16" for panels with bf16
//       weights multiplied in bf16 products (CpuBackendOptions::bf16_matmul), or a comma list of
//       these, "both" for rows,panels; every
//       run after the first also as a ratio to the first)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <sys/resource.h>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/base/status_macros.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/model/model.h"

namespace tandem::bench {
namespace {

constexpr int kBlockSize = 16;

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// CPU time of the whole process so far: every thread's user + system time.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// Tokens per second of wall time and per CPU-second of one run.
struct Rate {
  double wall = 0, cpu = 0;
};
Rate RateOf(double tokens, Clock::time_point start, double cpu_start) {
  return {tokens / Seconds(start), tokens / std::max(CpuSeconds() - cpu_start, 1e-9)};
}

std::int32_t Argmax(const float* row, int n) {
  return static_cast<std::int32_t>(std::max_element(row, row + n) - row);
}

class Bench {
 public:
  Bench(model::Model& m, kernels::Backend& backend, int max_seqs, int max_tokens)
      : m_(m), backend_(backend), blocks_per_seq_((max_tokens + kBlockSize - 1) / kBlockSize) {
    kv_.num_blocks = max_seqs * blocks_per_seq_;
    kv_.block_size = kBlockSize;
    kv_.num_layers = m.kv_layout().num_layers;
    kv_.floats_per_token = m.kv_layout().floats_per_token;
    kv_.base = backend.AllocateFloats(static_cast<std::size_t>(kv_.num_blocks) * kv_.block_floats());
    tables_.resize(max_seqs);
    // Interleaved blocks, as a shared pool hands them out.
    for (int i = 0; i < max_seqs; ++i) {
      for (int b = 0; b < blocks_per_seq_; ++b) tables_[i].push_back(b * max_seqs + i);
    }
  }
  ~Bench() { backend_.Free(kv_.base); }

  // Random-looking prompt ids (a fixed pattern: the weights are random anyway), one forward.
  absl::StatusOr<Rate> Prompt(int n) {
    const int vocab = m_.config().vocab_size;
    std::vector<std::int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((7919LL * (i + 1)) % vocab);
    std::vector<model::SequenceChunk> chunk{{ids, 0, tables_[0], model::LogitsMode::kLast}};
    logits_.clear();
    const auto start = Clock::now();
    const double cpu = CpuSeconds();
    if (absl::Status s = m_.Forward(chunk, kv_, &logits_); !s.ok()) return s;
    return RateOf(n, start, cpu);
  }

  // `batch` sequences from an empty cache, `n` greedy steps each; total tokens/s.
  absl::StatusOr<Rate> Generate(int batch, int n) {
    const int vocab = m_.config().vocab_size;
    std::vector<std::int32_t> next(batch);
    for (int i = 0; i < batch; ++i) next[i] = (m_.config().bos_token_id + i) % vocab;
    std::vector<model::SequenceChunk> chunks(batch);
    const auto start = Clock::now();
    const double cpu = CpuSeconds();
    for (int step = 0; step < n; ++step) {
      for (int i = 0; i < batch; ++i) {
        chunks[i] = {std::span<const std::int32_t>(&next[i], 1), step, tables_[i],
                     model::LogitsMode::kLast};
      }
      logits_.clear();
      if (absl::Status s = m_.Forward(chunks, kv_, &logits_); !s.ok()) return s;
      for (int i = 0; i < batch; ++i) next[i] = Argmax(logits_.data() + i * vocab, vocab);
    }
    return RateOf(static_cast<double>(batch) * n, start, cpu);
  }

 private:
  model::Model& m_;
  kernels::Backend& backend_;
  int blocks_per_seq_;
  model::KvStorage kv_;
  std::vector<std::vector<std::int32_t>> tables_;
  std::vector<float> logits_;
};

struct Stats {
  double mean = 0, stdev = 0, best = 0;
  double best_cpu = 0;  // tokens per CPU-second, best run
};

template <typename F>
absl::StatusOr<Stats> Repeat(int repeats, F run) {
  if (absl::StatusOr<Rate> warm = run(); !warm.ok()) return warm.status();
  std::vector<double> v;
  Stats s;
  for (int r = 0; r < repeats; ++r) {
    absl::StatusOr<Rate> x = run();
    if (!x.ok()) return x.status();
    v.push_back(x->wall);
    s.best_cpu = std::max(s.best_cpu, x->cpu);
  }
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  s.best = *std::max_element(v.begin(), v.end());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / (v.size() - 1)) : 0.0;
  return s;
}

struct Figures {
  double pp = 0, tg = 0, tg_batch = 0;  // best runs, tokens/s
};

// How the backend multiplies: the weights' layout, and bf16 on AMX or not.
struct MatMulMode {
  kernels::WeightLayout layout;
  kernels::Bf16MatMul bf16;
};

const char* ModeName(const MatMulMode& mode) {
  if (mode.bf16 != kernels::Bf16MatMul::kF32) return kernels::Bf16MatMulName(mode.bf16).data();
  return mode.layout == kernels::WeightLayout::kPanels ? "panels" : "rows";
}

// Loads the model on a backend of `isa` in `mode` and prints llama-bench's figures.
absl::StatusOr<Figures> RunOn(const std::string& path, kernels::CpuIsa isa, MatMulMode mode,
                              int threads, int pp, int tg, int repeats, int batch) {
  std::unique_ptr<kernels::Backend> backend = kernels::CreateCpuBackend(
      {.num_threads = threads, .isa = isa, .matmul_layout = mode.layout,
       .bf16_matmul = mode.bf16});
  const auto load_start = Clock::now();
  absl::StatusOr<std::unique_ptr<model::Model>> loaded = model::LoadModel(path, {}, backend.get());
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        "cannot load " + path + ": " + std::string(loaded.status().message()));
  }
  model::Model& m = **loaded;
  std::printf("model %s (vocab %d, %d layers, hidden %d), %d threads, %s, %s weights, "
              "load %.2f s\n",
              path.c_str(), m.config().vocab_size, m.config().num_layers, m.config().hidden_size,
              threads, std::string(backend->name()).c_str(), ModeName(mode),
              Seconds(load_start));
  Bench bench(m, *backend, batch, std::max(pp, tg));
  auto report = [](const std::string& test,
                   const absl::StatusOr<Stats>& s) -> absl::StatusOr<double> {
    if (!s.ok()) {
      return absl::Status(s.status().code(), test + ": " + std::string(s.status().message()));
    }
    // One line per figure, "test MEAN t/s +- STDEV best BEST ...", for scripts
    // (engine_vs_peers.py).
    std::printf("%-12s %10.2f t/s  +- %.2f  best %.2f  per cpu-s %.2f\n", test.c_str(), s->mean,
                s->stdev, s->best, s->best_cpu);
    return s->best;
  };
  const std::string pp_name = "pp" + std::to_string(pp), tg_name = "tg" + std::to_string(tg);
  Figures f;
  TANDEM_ASSIGN_OR_RETURN(f.pp,
                          report(pp_name, Repeat(repeats, [&] { return bench.Prompt(pp); })));
  TANDEM_ASSIGN_OR_RETURN(f.tg,
                          report(tg_name, Repeat(repeats, [&] { return bench.Generate(1, tg); })));
  if (batch > 1) {
    const std::string name = tg_name + "x" + std::to_string(batch);
    TANDEM_ASSIGN_OR_RETURN(
        f.tg_batch, report(name, Repeat(repeats, [&] { return bench.Generate(batch, tg); })));
  }
  return f;
}

int Main(int argc, char** argv) {
  // What the services' --bf16-matmul auto runs for a bf16 checkpoint here (engine_vs_peers.py
  // labels its rows by it): "amx", "avx512bf16" or "f32", then the dot products' measured rates.
  if (argc == 2 && std::string(argv[1]) == "--auto-bf16-products") {
    std::printf("%s", kernels::Bf16MatMulName(
                          kernels::AutoBf16MatMul(kernels::CpuIsa::kAuto, kernels::DType::kBF16))
                          .data());
    if (const auto& rates = kernels::Bf16DotRatesOfThisCpu()) {
      std::printf(" (one core: VDPBF16PS %.1f GFLOP/s, FMA %.1f GFLOP/s)", rates->dot_gflops,
                  rates->fma_gflops);
    }
    std::printf("\n");
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL_DIR [threads=2] [pp=512] [tg=128] [repeats=3] [batch=1] "
                 "[isa=auto|generic|avx2|avx512|all] [layout=panels|rows|amx|both|LIST]\n"
                 "       %s --auto-bf16-products\n",
                 argv[0], argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int pp = argc > 3 ? std::atoi(argv[3]) : 512;
  const int tg = argc > 4 ? std::atoi(argv[4]) : 128;
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 3;
  const int batch = argc > 6 ? std::atoi(argv[6]) : 1;
  const std::string isa_arg = argc > 7 ? argv[7] : "auto";
  const std::string layout_arg = argc > 8 ? argv[8] : "panels";
  if (threads <= 0 || pp <= 0 || tg <= 0 || repeats <= 0 || batch <= 0) {
    std::fprintf(stderr, "all arguments must be positive\n");
    return 2;
  }
  // "all": every ISA copy this binary and CPU run; "both": row-major weights, then panels. Each
  // configuration after the first is printed as a ratio to the first, measured in the same
  // invocation.
  std::vector<kernels::CpuIsa> isas;
  std::string isa_error;
  if (isa_arg == "all") {
    isas = kernels::AvailableCpuIsas();
  } else if (auto isa = kernels::ParseAvailableCpuIsa(isa_arg, &isa_error)) {
    isas = {*isa};
  } else {
    std::fprintf(stderr, "isa %s (or all)\n", isa_error.c_str());
    return 2;
  }
  std::vector<MatMulMode> modes;
  const MatMulMode rows{kernels::WeightLayout::kRows, kernels::Bf16MatMul::kF32};
  const MatMulMode panels{kernels::WeightLayout::kPanels, kernels::Bf16MatMul::kF32};
  for (std::size_t begin = 0; begin <= layout_arg.size();) {
    std::size_t end = layout_arg.find(',', begin);
    if (end == std::string::npos) end = layout_arg.size();
    const std::string name = layout_arg.substr(begin, end - begin);
    begin = end + 1;
    if (name == "rows" || name == "both") modes.push_back(rows);
    if (name == "panels" || name == "both") modes.push_back(panels);
    const bool bf16_products = name == "amx" || name == "avx512bf16";
    if (bf16_products) {
      std::string error;
      const auto bf16 = kernels::ParseAvailableBf16MatMul(name, kernels::CpuIsa::kAuto, &error);
      if (!bf16) {
        std::fprintf(stderr, "layout %s\n", error.c_str());
        return 2;
      }
      modes.push_back({kernels::WeightLayout::kPanels, *bf16});
    }
    if (name != "rows" && name != "panels" && !bf16_products && name != "both") {
      std::fprintf(stderr,
                   "layout %s: panels, rows, amx, avx512bf16, both or a comma list of them\n",
                   layout_arg.c_str());
      return 2;
    }
  }
  struct Run {
    kernels::CpuIsa isa;
    MatMulMode mode;
    Figures figures;
  };
  std::vector<Run> runs;
  for (kernels::CpuIsa isa : isas) {
    for (const MatMulMode& mode : modes) {
      std::string not_here;
      if (mode.bf16 != kernels::Bf16MatMul::kF32 &&
          !kernels::ParseAvailableBf16MatMul(kernels::Bf16MatMulName(mode.bf16), isa, &not_here)) {
        continue;  // bf16 products run beside the AVX-512 copy only
      }
      absl::StatusOr<Figures> f = RunOn(path, isa, mode, threads, pp, tg, repeats, batch);
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
        return 1;
      }
      runs.push_back({isa, mode, *f});
    }
  }
  auto label = [](const Run& r) {
    return std::string(kernels::CpuIsaName(r.isa)) + " " + ModeName(r.mode);
  };
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const Figures& a = runs[i].figures;
    const Figures& b = runs[0].figures;
    std::printf("%s / %s: pp %.2fx  tg %.2fx", label(runs[i]).c_str(), label(runs[0]).c_str(),
                a.pp / b.pp, a.tg / b.tg);
    if (batch > 1) std::printf("  tg x%d %.2fx", batch, a.tg_batch / b.tg_batch);
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) { return tandem::bench::Main(argc, argv); }
