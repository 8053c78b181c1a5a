// The MLA split-decode combine kernel against its host statement, gpu_plan::CombineChunkPartials.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "kernel_test_util.h"
#include "tandem/gpu_plan/mla_split_plan.h"
#include "tandem/kernels/cuda/ops.h"

namespace tandem::kernels::cuda {
namespace {

using gpu_plan::MlaSplitPlan;
using testing::DeviceBuffer;
using testing::RandomFloats;

class CudaMlaCombineTest : public testing::GpuTest {};

constexpr int kHeads = 3;
constexpr int kDim = 512;  // DeepSeek-V3's kv_lora_rank

// Per-chunk partial outputs and log-sum-exps as the split kernel would write them.
struct Partials {
  std::vector<float> out;  // [chunks][kHeads][kDim]
  std::vector<float> lse;  // [chunks][kHeads]
};

Partials RandomPartials(int chunks, std::mt19937& rng) {
  std::normal_distribution<float> lse(0.0f, 5.0f);
  Partials p{RandomFloats(static_cast<std::size_t>(chunks) * kHeads * kDim, rng),
             std::vector<float>(static_cast<std::size_t>(chunks) * kHeads)};
  for (float& l : p.lse) l = lse(rng);
  return p;
}

std::vector<float> RunCombine(const Partials& p, const std::vector<std::int32_t>& seq_begin,
                              cudaStream_t stream) {
  const int n_seqs = static_cast<int>(seq_begin.size()) - 1;
  DeviceBuffer<float> dp(p.out), dl(p.lse), dout(static_cast<std::size_t>(n_seqs) * kHeads * kDim);
  DeviceBuffer<std::int32_t> db(seq_begin);
  EXPECT_TRUE(MlaCombine(dp.get(), dl.get(), db.get(), n_seqs, kHeads, kDim, dout.get(), stream)
                  .ok());
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return dout.ToHost();
}

// Tolerance: expf and logf are within 2 ulp of the host's exp and log, so each chunk's weight is
// off by a few ulp relative; 1e-5 of the partials' magnitude (1 here) covers it.
TEST_F(CudaMlaCombineTest, MatchesHostCombineAndIsBatchInvariant) {
  std::mt19937 rng(8);
  const std::vector<int> lens = {1, 300, 1000, 64};  // 1, 3, 8 and 1 chunks of 128 tokens
  absl::StatusOr<MlaSplitPlan> plan =
      gpu_plan::PlanMlaSplit(lens, {.block_size = 64, .chunk_blocks = 2, .num_ctas = 132});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int chunks = static_cast<int>(plan->chunks.size());
  const Partials p = RandomPartials(chunks, rng);
  const std::vector<std::int32_t> seq_begin(plan->seq_chunk_begin.begin(),
                                            plan->seq_chunk_begin.end());
  const std::vector<float> got = RunCombine(p, seq_begin, stream_);

  for (int b = 0; b < static_cast<int>(lens.size()); ++b) {
    const int first = seq_begin[b];
    const int n = seq_begin[b + 1] - first;
    for (int h = 0; h < kHeads; ++h) {
      std::vector<float> part(static_cast<std::size_t>(n) * kDim), lse(n), want(kDim);
      for (int i = 0; i < n; ++i) {
        const std::size_t ch = static_cast<std::size_t>(first + i) * kHeads + h;
        std::memcpy(&part[i * kDim], &p.out[ch * kDim], kDim * sizeof(float));
        lse[i] = p.lse[ch];
      }
      gpu_plan::CombineChunkPartials(part, lse, kDim, want);
      const float* g = &got[(static_cast<std::size_t>(b) * kHeads + h) * kDim];
      for (int d = 0; d < kDim; ++d) {
        ASSERT_NEAR(g[d], want[d], 1e-5f) << "seq " << b << " head " << h << " d " << d;
      }
      if (n == 1) {
        EXPECT_EQ(std::memcmp(g, part.data(), kDim * sizeof(float)), 0)
            << "one chunk must pass through exactly (seq " << b << ")";
      }
    }
  }

  // The 1000-token sequence alone: its own chunks' partials, a batch of one.
  const int first = seq_begin[2];
  const int n = seq_begin[3] - first;
  Partials alone;
  alone.out.assign(p.out.begin() + static_cast<std::ptrdiff_t>(first) * kHeads * kDim,
                   p.out.begin() + static_cast<std::ptrdiff_t>(first + n) * kHeads * kDim);
  alone.lse.assign(p.lse.begin() + first * kHeads, p.lse.begin() + (first + n) * kHeads);
  const std::vector<float> one = RunCombine(alone, {0, n}, stream_);
  EXPECT_EQ(std::memcmp(one.data(), &got[2 * kHeads * kDim], one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem::kernels::cuda
