// RMSNorm, SiLU-mul, Axpy and Embed on the GPU against the reference CPU backend.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/cuda/ops.h"

namespace tandem::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::RandomFloats;
using testing::ToBf16;

class CudaElementwiseTest : public testing::GpuTest {
 protected:
  std::unique_ptr<Backend> ref_ = CreateReferenceCpuBackend();
};

// Tolerance: the reference sums x^2 left to right, the kernel in a fixed tree over 256 threads;
// every output of a row shares the one scale factor, so each is off by that factor's relative
// error, about sqrt(dim) float roundings (1e-5 covers dim 7168 with a wide margin).
TEST_F(CudaElementwiseTest, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  for (DType wt : {DType::kF32, DType::kBF16}) {
    for (std::int64_t dim : {1, 7, 255, 256, 257, 2048, 7168}) {
      const std::int64_t rows = 5;
      const std::vector<float> x = RandomFloats(rows * dim, rng, -3.0f, 3.0f);
      const std::vector<float> w = RandomFloats(dim, rng, 0.5f, 1.5f);
      const std::vector<std::uint16_t> w16 = ToBf16(w);
      const void* host_w = wt == DType::kF32 ? static_cast<const void*>(w.data()) : w16.data();
      std::vector<float> want(rows * dim);
      ref_->RmsNorm(x.data(), rows, dim, WeightView{host_w, wt, 1, dim}, 1e-6f, want.data());

      DeviceBuffer<float> dx(x), dy(rows * dim);
      DeviceBuffer<float> dw32(w);
      DeviceBuffer<std::uint16_t> dw16(w16);
      const void* dev_w = wt == DType::kF32 ? static_cast<const void*>(dw32.get()) : dw16.get();
      ASSERT_TRUE(RmsNorm(dx.get(), rows, dim, WeightView{dev_w, wt, 1, dim}, 1e-6f, dy.get(),
                          stream_)
                      .ok());
      // In place too (x and y may alias).
      ASSERT_TRUE(RmsNorm(dx.get(), rows, dim, WeightView{dev_w, wt, 1, dim}, 1e-6f, dx.get(),
                          stream_)
                      .ok());
      Sync();
      const std::vector<float> got = dy.ToHost();
      const std::vector<float> in_place = dx.ToHost();
      for (std::int64_t i = 0; i < rows * dim; ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5f * std::abs(want[i]))
            << DTypeName(wt) << " dim " << dim << " i " << i;
      }
      EXPECT_EQ(std::memcmp(got.data(), in_place.data(), got.size() * sizeof(float)), 0);
    }
  }
}

// Batch invariance: a row normalised alone gives the same bits as inside a batch.
TEST_F(CudaElementwiseTest, RmsNormRowDoesNotDependOnBatch) {
  std::mt19937 rng(2);
  const std::int64_t dim = 7168, rows = 33;
  const std::vector<float> x = RandomFloats(rows * dim, rng, -3.0f, 3.0f);
  const std::vector<float> w = RandomFloats(dim, rng, 0.5f, 1.5f);
  DeviceBuffer<float> dx(x), dw(w), batch(rows * dim), alone(dim);
  const WeightView wv{dw.get(), DType::kF32, 1, dim};
  ASSERT_TRUE(RmsNorm(dx.get(), rows, dim, wv, 1e-6f, batch.get(), stream_).ok());
  const std::vector<float> b = batch.ToHost();
  for (std::int64_t r : {0, 17, 32}) {
    ASSERT_TRUE(RmsNorm(dx.get() + r * dim, 1, dim, wv, 1e-6f, alone.get(), stream_).ok());
    Sync();
    const std::vector<float> a = alone.ToHost();
    EXPECT_EQ(std::memcmp(a.data(), b.data() + r * dim, dim * sizeof(float)), 0) << "row " << r;
  }
}

// Tolerance: CUDA's expf is within 2 ulp of exp (the reference's std::exp within 1), then one
// add, one division and one multiply, each correctly rounded: 1e-6 relative covers it.
TEST_F(CudaElementwiseTest, SiluMulMatchesReference) {
  std::mt19937 rng(3);
  const std::int64_t rows = 7, hidden = 1000;
  std::vector<float> gate = RandomFloats(rows * hidden, rng, -20.0f, 20.0f);
  const std::vector<float> up = RandomFloats(rows * hidden, rng, -2.0f, 2.0f);
  // exp overflow and underflow on both sides.
  gate[0] = -100.0f;
  gate[1] = 100.0f;
  gate[2] = 0.0f;
  gate[3] = -0.0f;
  std::vector<float> want(rows * hidden);
  ref_->SiluMul(gate.data(), up.data(), rows, hidden, want.data());
  DeviceBuffer<float> dg(gate), du(up), dout(rows * hidden);
  ASSERT_TRUE(SiluMul(dg.get(), du.get(), rows, hidden, dout.get(), stream_).ok());
  Sync();
  const std::vector<float> got = dout.ToHost();
  for (std::int64_t i = 0; i < rows * hidden; ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6f * std::abs(want[i])) << "i " << i << " gate " << gate[i];
  }
}

// Exact: a multiply then an add, both correctly rounded on both sides (no FMA: --fmad=false).
TEST_F(CudaElementwiseTest, AxpyIsBitExact) {
  std::mt19937 rng(4);
  const std::int64_t n = 100003;
  const std::vector<float> x = RandomFloats(n, rng);
  std::vector<float> y = RandomFloats(n, rng);
  DeviceBuffer<float> dx(x), dy(y);
  ref_->Axpy(0.37f, x.data(), n, y.data());
  ASSERT_TRUE(Axpy(0.37f, dx.get(), n, dy.get(), stream_).ok());
  Sync();
  const std::vector<float> got = dy.ToHost();
  EXPECT_EQ(std::memcmp(got.data(), y.data(), n * sizeof(float)), 0);
}

// Exact: a copy (bf16 widened by a shift). Ids outside the table give NaN rows.
TEST_F(CudaElementwiseTest, EmbedIsExactAndOutOfRangeIdsGiveNan) {
  std::mt19937 rng(5);
  const std::int64_t vocab = 1000, dim = 300;
  const std::vector<float> table = RandomFloats(vocab * dim, rng);
  const std::vector<std::uint16_t> table16 = ToBf16(table);
  const std::vector<std::int32_t> ids = {0, 999, 5, 5, 512};
  DeviceBuffer<float> t32(table), out(ids.size() * dim);
  DeviceBuffer<std::uint16_t> t16(table16);
  DeviceBuffer<std::int32_t> dids(ids);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const void* host_t =
        dt == DType::kF32 ? static_cast<const void*>(table.data()) : table16.data();
    const void* dev_t = dt == DType::kF32 ? static_cast<const void*>(t32.get()) : t16.get();
    std::vector<float> want(ids.size() * dim);
    ref_->Embed(WeightView{host_t, dt, vocab, dim}, ids.data(), ids.size(), want.data());
    ASSERT_TRUE(
        Embed(WeightView{dev_t, dt, vocab, dim}, dids.get(), ids.size(), out.get(), stream_).ok());
    Sync();
    const std::vector<float> got = out.ToHost();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << DTypeName(dt);
  }
  const std::vector<std::int32_t> bad = {-1, static_cast<std::int32_t>(vocab)};
  DeviceBuffer<std::int32_t> dbad(bad);
  ASSERT_TRUE(Embed(WeightView{t32.get(), DType::kF32, vocab, dim}, dbad.get(), 2, out.get(),
                    stream_)
                  .ok());
  Sync();
  const std::vector<float> got = out.ToHost();
  for (std::int64_t i = 0; i < 2 * dim; ++i) ASSERT_TRUE(std::isnan(got[i])) << i;
}

// Host-side argument checks: they run before anything touches a device, so they run everywhere.
TEST(CudaOpsArgumentsTest, BadCallsFailBeforeLaunch) {
  float* fake = reinterpret_cast<float*>(std::uintptr_t{256});  // never dereferenced
  const WeightView w32{fake, DType::kF32, 1, 8};
  EXPECT_EQ(RmsNorm(fake, -1, 8, w32, 1e-6f, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(fake, 1, 9, w32, 1e-6f, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);  // weight shorter than dim
  EXPECT_EQ(RmsNorm(fake, 1, 8, WeightView{fake, DType::kF16, 1, 8}, 1e-6f, fake, nullptr).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RmsNorm(nullptr, 1, 8, w32, 1e-6f, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SiluMul(fake, nullptr, 2, 4, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SiluMul(fake, fake, std::int64_t{1} << 40, 4, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Axpy(1.0f, fake, -3, fake, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Embed(WeightView{fake, DType::kF8E4M3, 10, 8}, reinterpret_cast<std::int32_t*>(fake),
                  1, fake, nullptr)
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Embed(w32, nullptr, 1, fake, nullptr).code(), absl::StatusCode::kInvalidArgument);
  const auto* fake_ids = reinterpret_cast<const std::int32_t*>(fake);
  EXPECT_EQ(MlaCombine(fake, fake, fake_ids, 1, 2, 0, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MlaCombine(fake, fake, fake_ids, 1 << 20, 1 << 12, 8, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);  // more CTAs than gridDim.x holds
  EXPECT_EQ(MlaCombine(fake, nullptr, fake_ids, 1, 2, 8, fake, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing to do is fine and launches nothing.
  EXPECT_TRUE(Axpy(1.0f, nullptr, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels::cuda
