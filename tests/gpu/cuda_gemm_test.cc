// cuBLAS MatMul against the reference backend, f32 and bf16 weights.
#include <cmath>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/cuda/gemm.h"

namespace tandem::kernels::cuda {
namespace {

using testing::DeviceBuffer;
using testing::RandomFloats;
using testing::ToBf16;

class CudaGemmTest : public testing::GpuTest {};

// Tolerance per output, relative to the dot product's natural scale S = sum_i |x_i * w_i|:
// f32 weights 1e-5 S (the bound the CPU kernel tests use: float accumulation in another order);
// bf16 weights 2^-8 S, since rounding x to bf16 moves each product by at most 2^-9 of itself,
// plus the f32 accumulation. A wrong index or a missed transpose is off by O(S).
TEST_F(CudaGemmTest, MatMulMatchesReference) {
  std::mt19937 rng(6);
  const std::vector<std::tuple<int, int, int>> shapes = {
      {1, 7, 5}, {3, 33, 257}, {17, 128, 1024}, {64, 512, 7168}, {129, 1, 64}};
  std::int64_t max_elements = 0;
  for (auto [rows, out, in] : shapes) {
    max_elements = std::max<std::int64_t>(max_elements, std::int64_t{rows} * in);
  }
  absl::StatusOr<std::unique_ptr<CublasGemm>> gemm = CublasGemm::Create(max_elements);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  std::unique_ptr<Backend> ref = CreateReferenceCpuBackend();
  for (DType wt : {DType::kF32, DType::kBF16}) {
    for (auto [rows, out, in] : shapes) {
      const std::vector<float> x = RandomFloats(static_cast<std::size_t>(rows) * in, rng);
      const std::vector<float> w = RandomFloats(static_cast<std::size_t>(out) * in, rng);
      const std::vector<std::uint16_t> w16 = ToBf16(w);
      const WeightView host_w{wt == DType::kF32 ? static_cast<const void*>(w.data()) : w16.data(),
                              wt, out, in};
      std::vector<float> want(static_cast<std::size_t>(rows) * out);
      ref->MatMul(x.data(), rows, host_w, want.data());

      DeviceBuffer<float> dx(x), dw32(w), dy(want.size());
      DeviceBuffer<std::uint16_t> dw16(w16);
      const WeightView dev_w{wt == DType::kF32 ? static_cast<const void*>(dw32.get()) : dw16.get(),
                             wt, out, in};
      ASSERT_TRUE((*gemm)->MatMul(dx.get(), rows, dev_w, dy.get(), stream_).ok());
      Sync();
      const std::vector<float> got = dy.ToHost();
      const float rel = wt == DType::kF32 ? 1e-5f : 0x1p-8f;
      for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out; ++o) {
          float scale = 0.0f;
          for (int i = 0; i < in; ++i) scale += std::abs(x[r * in + i] * host_w.At(o, i));
          ASSERT_NEAR(got[r * out + o], want[r * out + o], rel * scale + 1e-30f)
              << DTypeName(wt) << " " << rows << "x" << out << "x" << in << " at " << r << ","
              << o;
        }
      }
    }
  }
}

TEST_F(CudaGemmTest, RefusesWhatItCannotDo) {
  absl::StatusOr<std::unique_ptr<CublasGemm>> gemm = CublasGemm::Create(16);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  DeviceBuffer<float> buf(64);
  DeviceBuffer<std::uint16_t> w16(64);
  // 2 x 16 activations do not fit a staging buffer of 16.
  EXPECT_EQ((*gemm)->MatMul(buf.get(), 2, WeightView{w16.get(), DType::kBF16, 4, 16}, buf.get(),
                            stream_)
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*gemm)->MatMul(buf.get(), 1, WeightView{w16.get(), DType::kF16, 4, 16}, buf.get(),
                            stream_)
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ((*gemm)->MatMul(buf.get(), -1, WeightView{buf.get(), DType::kF32, 4, 16}, buf.get(),
                            stream_)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels::cuda
