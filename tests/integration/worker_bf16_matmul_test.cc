// The worker's --bf16-matmul default (auto) end to end: the process reads the checkpoint's dtype
// before it creates its backend, so a bf16 checkpoint runs in bf16 products where this CPU has
// them and every other checkpoint, or an explicit f32, in float32 products. The startup line
// names the backend the worker made.

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_processes.h"
#include "gtest/gtest.h"
#include "tandem/kernels/backend.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::Proc;

const fs::path kFixtures = fs::path(TANDEM_SOURCE_DIR) / "tests" / "fixtures";

class WorkerBf16MatMul : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_wbf16_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The backend named on the worker's "serving ..." line, e.g. "cpu-avx512-avx512bf16".
  std::string BackendOfWorker(const std::string& fixture, std::vector<std::string> extra = {}) {
    Proc worker;
    std::vector<std::string> args = {"--listen", "127.0.0.1:0",   "--threads",
                                     "1",        "--kv-cache-mb", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::StartProc(&worker, dir_, TANDEM_WORKER_BIN, fixture, kFixtures / fixture, args);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string log = worker.process.log();
      const std::size_t serving = log.find(" serving ");
      const std::size_t open = log.find(" (", serving);
      const std::size_t close = log.find(")\n", open);
      if (serving != std::string::npos && open != std::string::npos && close != std::string::npos) {
        return log.substr(open + 2, close - open - 2);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << fixture << ": no serving line in\n" << worker.process.log();
    return "";
  }

  fs::path dir_;
};

std::string BackendName(kernels::Bf16MatMul mode) {
  return std::string(kernels::CreateCpuBackend({.num_threads = 1, .bf16_matmul = mode})->name());
}

TEST_F(WorkerBf16MatMul, ABf16CheckpointGetsTheCpusBf16ProductsByDefault) {
  const kernels::Bf16MatMul picked =
      kernels::AutoBf16MatMul(kernels::CpuIsa::kAuto, kernels::DType::kBF16);
  if (picked == kernels::Bf16MatMul::kF32) {
    std::cout << "note: this CPU has no bf16 products; auto falls back to f32 here\n";
  }
  EXPECT_EQ(BackendOfWorker("deepseek_v3_tiny_bf16"), BackendName(picked));
  EXPECT_EQ(BackendOfWorker("deepseek_v3_tiny_bf16", {"--bf16-matmul", "f32"}),
            BackendName(kernels::Bf16MatMul::kF32));
}

TEST_F(WorkerBf16MatMul, OtherCheckpointsKeepFloat32Products) {
  const std::string plain = BackendName(kernels::Bf16MatMul::kF32);
  EXPECT_EQ(BackendOfWorker("llama_tiny"), plain);
  EXPECT_EQ(BackendOfWorker("llama_tiny_f16"), plain);
  EXPECT_EQ(BackendOfWorker("deepseek_v3_tiny_fp8"), plain);
}

}  // namespace
}  // namespace tandem
