#pragma once
// How both MatMul kernels (row-major: matmul.cc, panels: panel_matmul.cc) split a call over the
// pool: by output units (register-tile blocks or panels), never over the reduction.
#include <algorithm>
#include <cstdint>

#include "runtime/thread_pool.h"

namespace tandem::kernels::cpu {

// Below this many multiply-adds a call runs on the calling thread: waking workers costs more.
inline constexpr std::int64_t kMatMulParallelMacs = 1 << 19;
// Tasks per thread: dynamic hand-out evens out cores shared with other work.
inline constexpr int kMatMulTasksPerThread = 4;

// Tasks for `units` output units of a rows x out x in MatMul; task t takes units
// [units * t / tasks, units * (t + 1) / tasks).
inline int MatMulTasks(const ThreadPool& pool, std::int64_t rows, std::int64_t out, std::int64_t in,
                       std::int64_t units) {
  if (rows * out * in < kMatMulParallelMacs || pool.size() <= 1) return 1;
  return static_cast<int>(std::min<std::int64_t>(units, pool.size() * kMatMulTasksPerThread));
}

}  // namespace tandem::kernels::cpu
