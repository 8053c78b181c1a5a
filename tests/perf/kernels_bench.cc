// Kernel benchmarks: the fast CPU backend against the reference backend (MatMul f32/bf16/f16/fp8
// at rows 1 and 16, paged GQA and MLA decode attention), and GEMV's achieved memory bandwidth against a plain stream
// read and memcpy of the same size measured in the same run. Prints the ratios after the table.
//
//   build-x/tests/perf/tandem_kernels_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/panels.h"

namespace tandem::bench {
namespace {

using kernels::Backend;
using kernels::DType;
using kernels::WeightView;
using kernels::WeightLayout;

// Deterministic, cheap fill (a random generator over 512 MB would dominate start-up).
void Fill(float* p, std::size_t n, std::uint32_t seed) {
  std::uint32_t s = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(static_cast<std::int32_t>(s >> 8) - (1 << 23)) * (1.0f / (1 << 23));
  }
}

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3};

// Weights in the benchmarked dtype only (no float32 copy kept: 512 MiB of it would crowd the
// machine). F16 and FP8 take random bit patterns of the same magnitudes as Fill's floats; FP8
// carries DeepSeek's 128 x 128 block scales.
struct Weights {
  std::vector<float> f32;
  std::vector<std::uint16_t> u16;
  std::vector<std::uint8_t> fp8;
  std::vector<float> scales;
  WeightView view;
  Weights(std::int64_t rows, std::int64_t cols, DType dtype) {
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    std::uint32_t s = static_cast<std::uint32_t>(rows + cols) * 2654435761u + 1;
    auto next = [&s] { return s = s * 1664525u + 1013904223u; };
    switch (dtype) {
      case DType::kF32:
      case DType::kBF16:
        f32.resize(n);
        Fill(f32.data(), n, static_cast<std::uint32_t>(rows + cols));
        if (dtype == DType::kF32) {
          view = {f32.data(), dtype, rows, cols};
          return;
        }
        u16.resize(n);
        for (std::size_t i = 0; i < n; ++i) u16[i] = kernels::F32ToBf16(f32[i]);
        std::vector<float>().swap(f32);
        view = {u16.data(), dtype, rows, cols};
        return;
      case DType::kF16:
        u16.resize(n);
        for (std::uint16_t& h : u16) {  // sign, exponent 2^-10..2^-1, mantissa
          const std::uint32_t u = next() >> 8;
          h = static_cast<std::uint16_t>((u & 0x8000u) | ((5 + (u >> 16) % 10) << 10) | (u & 0x3ffu));
        }
        view = {u16.data(), dtype, rows, cols};
        return;
      case DType::kF8E4M3: {
        fp8.resize(n);
        for (std::uint8_t& b : fp8) {
          b = static_cast<std::uint8_t>(next() >> 24);
          if ((b & 0x7f) == 0x7f) b &= 0xfe;  // no NaN encodings
        }
        const std::int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
        scales.assign(sr * sc, 1.0f / 448);
        view = {fp8.data(), dtype, rows, cols, {scales.data(), sc, 128, 128}};
        return;
      }
    }
  }
};

std::unique_ptr<Backend> MakeBackend(bool fast, int threads = 0,
                                     kernels::Bf16MatMul bf16 = kernels::Bf16MatMul::kF32) {
  return fast ? kernels::CreateCpuBackend({.num_threads = threads, .bf16_matmul = bf16})
              : kernels::CreateReferenceCpuBackend();
}

// A weight layout, and for kBf16Tiles the engine of the bf16 products.
struct Layout {
  WeightLayout layout;
  kernels::Bf16MatMul bf16 = kernels::Bf16MatMul::kF32;
};

const char* Kind(bool fast) { return fast ? "fast" : "reference"; }

// A packed layout: the weights packed once (PanelWeight) before timing, as the Llama forward does
// at load; kBf16Tiles on a backend that runs bf16 products (AMX or AVX512-BF16).
void MatMulBench(benchmark::State& state, bool fast, DType dtype, std::int64_t rows,
                 std::int64_t out, std::int64_t in, int threads, Layout how) {
  auto backend = MakeBackend(fast, threads, how.bf16);
  const WeightLayout layout = how.layout;
  Weights w(out, in, dtype);
  std::optional<kernels::PanelWeight> packed;
  if (layout != WeightLayout::kRows) packed.emplace(kernels::PanelWeight::Pack(w.view, layout));
  const WeightView& view = packed ? packed->view() : w.view;
  std::vector<float> x(rows * in), y(rows * out);
  Fill(x.data(), x.size(), 7);
  for (auto _ : state) {
    backend->MatMul(x.data(), rows, view, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * out * in * 2);  // flops
  state.SetBytesProcessed(state.iterations() * out * in *
                          static_cast<std::int64_t>(kernels::DTypeSize(dtype)));
}

int HardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Plain reads of `bytes` split over `threads` threads: the bandwidth ceiling for GEMV.
void StreamReadBench(benchmark::State& state, std::size_t bytes, int threads) {
  const std::size_t words = bytes / sizeof(std::uint64_t);
  std::vector<std::uint64_t> buf(words);
  Fill(reinterpret_cast<float*>(buf.data()), words * 2, 3);
  std::vector<std::uint64_t> sums(threads);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t a = words * t / threads, b = words * (t + 1) / threads;
        // kStreams sequential streams read side by side, one 64-byte integer accumulator each:
        // as many concurrent streams as the hardware prefetchers track well (GEMV reads 4 rows
        // at once), so this is a plain-read ceiling, not a single-stream figure.
        constexpr int kStreams = 8;
        typedef std::uint64_t U8x64 __attribute__((vector_size(64)));
        U8x64 acc[kStreams] = {};
        const std::size_t seg = (b - a) / kStreams / 8 * 8;
        for (std::size_t i = 0; i < seg; i += 8) {
          for (int k = 0; k < kStreams; ++k) {
            U8x64 v;
            std::memcpy(&v, &buf[a + k * seg + i], sizeof(v));
            acc[k] += v;
          }
        }
        std::uint64_t s = 0;
        for (std::size_t i = a + kStreams * seg; i < b; ++i) s += buf[i];
        for (int k = 0; k < kStreams; ++k) {
          for (int l = 0; l < 8; ++l) s += acc[k][l];
        }
        sums[t] = s;
      });
    }
    for (std::thread& th : pool) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(words * 8));
}

void MemcpyBench(benchmark::State& state, std::size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

void GqaDecodeBench(benchmark::State& state, bool fast, int ctx) {
  constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;
  auto backend = MakeBackend(fast);
  const std::int64_t token_floats = 2LL * kKvHeads * kHeadDim;
  const int blocks = (ctx + kBlock - 1) / kBlock;
  std::vector<float> cache(static_cast<std::size_t>(blocks) * kBlock * token_floats);
  Fill(cache.data(), cache.size(), 11);
  std::vector<std::int32_t> table(blocks);  // scattered blocks, as a real pool hands them out
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(1));
  std::vector<float> q(kHeads * kHeadDim), out(q.size());
  Fill(q.data(), q.size(), 5);
  kernels::GqaAttentionParams p;
  p.q = q.data();
  p.out = out.data();
  p.n_tokens = 1;
  p.start_pos = ctx - 1;
  p.n_heads = kHeads;
  p.n_kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  p.kv = {cache.data(), kBlock * token_floats, token_floats, kBlock, table.data(), blocks};
  p.k_offset = 0;
  p.v_offset = kKvHeads * kHeadDim;
  for (auto _ : state) {
    backend->GqaAttention(p);
    benchmark::DoNotOptimize(out.data());
  }
}

void MlaDecodeBench(benchmark::State& state, bool fast, int ctx) {
  constexpr int kHeads = 16, kRank = 512, kRope = 64, kBlock = 64;
  auto backend = MakeBackend(fast);
  const std::int64_t token_floats = kRank + kRope;
  const int blocks = (ctx + kBlock - 1) / kBlock;
  std::vector<float> cache(static_cast<std::size_t>(blocks) * kBlock * token_floats);
  Fill(cache.data(), cache.size(), 13);
  std::vector<std::int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(2));
  std::vector<float> q_latent(kHeads * kRank), q_rope(kHeads * kRope), out(q_latent.size());
  Fill(q_latent.data(), q_latent.size(), 17);
  Fill(q_rope.data(), q_rope.size(), 19);
  kernels::MlaAttentionParams p;
  p.q_latent = q_latent.data();
  p.q_rope = q_rope.data();
  p.out_latent = out.data();
  p.n_tokens = 1;
  p.start_pos = ctx - 1;
  p.n_heads = kHeads;
  p.kv_lora_rank = kRank;
  p.rope_dim = kRope;
  p.scale = 1.0f / std::sqrt(192.0f);
  p.kv = {cache.data(), kBlock * token_floats, token_floats, kBlock, table.data(), blocks};
  for (auto _ : state) {
    backend->MlaAttention(p);
    benchmark::DoNotOptimize(out.data());
  }
}

struct Shape {
  std::int64_t rows, out, in;
};
constexpr Shape kShapes[] = {{1, 4096, 4096}, {16, 4096, 4096}, {1, 64, 64}, {16, 64, 64}};
// The fast backend alone (the reference would take seconds per call) on the projections of the
// 287.5M Llama of the peer comparisons (docs/performance.md): a 512-token prefill through
// q/o (1024 x 1024), gate/up (4096 x 1024) and down (1024 x 4096), and decode batches of 8 and 16
// through gate/up. Summarised in GFLOP/s of wall time and per CPU-second of the whole process (all
// threads): on a shared machine the first is the share the kernel got, the second its own cost.
constexpr Shape kFastShapes[] = {{512, 1024, 1024}, {512, 4096, 1024}, {512, 1024, 4096},
                                 {8, 4096, 1024},   {16, 4096, 1024}};
constexpr DType kFastDtypes[] = {DType::kF32, DType::kBF16};
constexpr std::int64_t kGemvOut = 16384, kGemvIn = 8192;  // 512 MiB in f32: far beyond cache

std::string MatMulName(bool fast, DType dtype, const Shape& s) {
  return std::string("MatMul/") + Kind(fast) + "/" + std::string(kernels::DTypeName(dtype)) +
         "/rows:" + std::to_string(s.rows) + "/" + std::to_string(s.out) + "x" +
         std::to_string(s.in);
}

std::string Suffix(Layout how) {
  switch (how.layout) {
    case WeightLayout::kRows: return "";
    case WeightLayout::kPanels: return "/panels";
    case WeightLayout::kBf16Tiles:
      return "/" + std::string(kernels::Bf16MatMulName(how.bf16));
  }
  return "?";
}

// The layouts benchmarked for `dtype`: rows, panels, and bf16 tiles on AMX and with AVX512-BF16
// where they run.
std::vector<Layout> Layouts(DType dtype) {
  std::vector<Layout> out = {{WeightLayout::kRows}, {WeightLayout::kPanels}};
  if (dtype == DType::kBF16 && kernels::IsAmxBf16Available()) {
    out.push_back({WeightLayout::kBf16Tiles, kernels::Bf16MatMul::kAmx});
  }
  if (dtype == DType::kBF16 && kernels::IsAvx512Bf16Available()) {
    out.push_back({WeightLayout::kBf16Tiles, kernels::Bf16MatMul::kAvx512Bf16});
  }
  return out;
}

std::string GemvName(DType dtype, int threads) {
  return std::string("Gemv/fast/") + std::string(kernels::DTypeName(dtype)) + "/" +
         std::to_string(kGemvOut) + "x" + std::to_string(kGemvIn) + "/threads:" +
         std::to_string(threads);
}
// A GEMV whose weights stay in L2 (f32 1 MiB, fp8 256 KiB): what the kernel computes per second
// when memory is not the limit, on one thread and by CPU time (so other load on a shared machine
// distorts it less). GEMV is bandwidth-bound when this is well above the streamed rate.
constexpr std::int64_t kCachedOut = 256, kCachedIn = 1024;
std::string GemvCachedName(DType dtype) {
  return std::string("GemvInCache/fast/") + std::string(kernels::DTypeName(dtype)) + "/" +
         std::to_string(kCachedOut) + "x" + std::to_string(kCachedIn);
}
std::string StreamName(int threads) { return "StreamRead/threads:" + std::to_string(threads); }

void Register() {
  for (DType dtype : kDtypes) {
    for (const Shape& s : kShapes) {
      for (bool fast : {true, false}) {
        benchmark::RegisterBenchmark(MatMulName(fast, dtype, s).c_str(), MatMulBench, fast, dtype,
                                     s.rows, s.out, s.in, 0, Layout{WeightLayout::kRows})
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (DType dtype : kFastDtypes) {
    for (Layout layout : Layouts(dtype)) {
      for (const Shape& s : kFastShapes) {
        benchmark::RegisterBenchmark((MatMulName(true, dtype, s) + Suffix(layout)).c_str(),
                                     MatMulBench, true, dtype, s.rows, s.out, s.in, 0, layout)
            ->UseRealTime()
            ->MeasureProcessCPUTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (DType dtype : kDtypes) {
    for (Layout layout : Layouts(dtype)) {
      benchmark::RegisterBenchmark((GemvCachedName(dtype) + Suffix(layout)).c_str(), MatMulBench,
                                   true, dtype, 1, kCachedOut, kCachedIn, 1, layout)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  const std::size_t stream_bytes = kGemvOut * kGemvIn * sizeof(float);
  for (int threads : {1, HardwareThreads()}) {
    for (DType dtype : kDtypes) {
      for (Layout layout : Layouts(dtype)) {
        benchmark::RegisterBenchmark((GemvName(dtype, threads) + Suffix(layout)).c_str(),
                                     MatMulBench, true, dtype, 1, kGemvOut, kGemvIn, threads,
                                     layout)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
    benchmark::RegisterBenchmark(StreamName(threads).c_str(), StreamReadBench, stream_bytes, threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("Memcpy/one_thread", MemcpyBench, stream_bytes / 2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (bool fast : {true, false}) {
    benchmark::RegisterBenchmark((std::string("GqaDecode/") + Kind(fast) + "/ctx:2048").c_str(),
                                 GqaDecodeBench, fast, 2048)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("MlaDecode/") + Kind(fast) + "/ctx:2048").c_str(),
                                 MlaDecodeBench, fast, 2048)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

void PrintSummary(const RecordingReporter& reporter) {
  const auto& results = reporter.results();
  std::printf("\n== fast vs reference (speedup = reference time / fast time) ==\n");
  for (DType dtype : kDtypes) {
    for (const Shape& s : kShapes) {
      const RunResult* f = Find(results, MatMulName(true, dtype, s));
      const RunResult* r = Find(results, MatMulName(false, dtype, s));
      if (f == nullptr || r == nullptr) continue;
      std::printf("%-40s fast %10.1f us  reference %12.1f us  speedup %7.1fx\n",
                  MatMulName(true, dtype, s).substr(12).c_str(), f->real_time_us, r->real_time_us,
                  r->real_time_us / f->real_time_us);
    }
  }
  for (const char* op : {"GqaDecode", "MlaDecode"}) {
    const RunResult* f = Find(results, std::string(op) + "/fast/ctx:2048");
    const RunResult* r = Find(results, std::string(op) + "/reference/ctx:2048");
    if (f == nullptr || r == nullptr) continue;
    std::printf("%-40s fast %10.1f us  reference %12.1f us  speedup %7.1fx\n",
                (std::string(op) + "/ctx:2048").c_str(), f->real_time_us, r->real_time_us,
                r->real_time_us / f->real_time_us);
  }
  std::printf("\n== fast MatMul, all threads (GFLOP = 2 x rows x out x in; per wall second, "
              "per CPU-second of all threads) ==\n");
  for (DType dtype : kFastDtypes) {
    for (Layout layout : Layouts(dtype)) {
      for (const Shape& s : kFastShapes) {
        const std::string name = MatMulName(true, dtype, s) + Suffix(layout);
        const RunResult* f = Find(results, name);
        if (f == nullptr) continue;
        const double gflop = 2e-9 * s.rows * s.out * s.in;
        std::printf("%-40s %10.1f us  %7.1f GFLOP/s  %7.1f GFLOP/cpu-s", name.substr(12).c_str(),
                    f->real_time_us, gflop / (f->real_time_us * 1e-6),
                    gflop / (f->cpu_time_us * 1e-6));
        // Packed against row-major weights (and bf16 products against panels), same shape, same
        // invocation: the time ratio.
        const RunResult* rows = Find(results, MatMulName(true, dtype, s));
        if (layout.layout != WeightLayout::kRows && rows != nullptr) {
          std::printf("  %.2fx rows", rows->real_time_us / f->real_time_us);
        }
        const RunResult* panels = Find(results, MatMulName(true, dtype, s) + "/panels");
        if (layout.layout == WeightLayout::kBf16Tiles && panels != nullptr) {
          std::printf("  %.2fx panels", panels->real_time_us / f->real_time_us);
        }
        std::printf("\n");
      }
    }
  }
  std::printf("\n== GEMV bandwidth (weight bytes read per second: 512 MiB f32, 256 MiB bf16/f16, "
              "128 MiB fp8; weights per second = bytes / element size) ==\n");
  for (DType dtype : kDtypes) {
    for (Layout layout : Layouts(dtype)) {
      const std::string name = GemvCachedName(dtype) + Suffix(layout);
      const RunResult* c = Find(results, name);
      if (c == nullptr) continue;
      std::printf("%-42s in L2, 1 thread, CPU time: %6.2f G weights/s\n", name.c_str(),
                  c->bytes_per_second / 1e9 / static_cast<double>(kernels::DTypeSize(dtype)));
    }
  }
  if (const RunResult* copy = Find(results, "Memcpy/one_thread"); copy != nullptr) {
    std::printf("memcpy, one thread: %6.2f GB/s (bytes copied)\n", copy->bytes_per_second / 1e9);
  }
  for (int threads : {1, HardwareThreads()}) {
    const RunResult* stream = Find(results, StreamName(threads));
    if (stream == nullptr) continue;
    std::printf("stream read, %d thread(s): %6.2f GB/s\n", threads, stream->bytes_per_second / 1e9);
    for (DType dtype : kDtypes) {
      for (Layout layout : Layouts(dtype)) {
        const std::string name = GemvName(dtype, threads) + Suffix(layout);
        const RunResult* g = Find(results, name);
        if (g == nullptr || stream->bytes_per_second <= 0) continue;
        std::printf("  %-49s %6.2f GB/s = %.2f of stream read, %6.2f G weights/s\n",
                    name.c_str(), g->bytes_per_second / 1e9,
                    g->bytes_per_second / stream->bytes_per_second,
                    g->bytes_per_second / 1e9 / static_cast<double>(kernels::DTypeSize(dtype)));
      }
    }
  }
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tandem::bench::Register();
  tandem::bench::RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  tandem::bench::PrintSummary(reporter);
  benchmark::Shutdown();
  return 0;
}
