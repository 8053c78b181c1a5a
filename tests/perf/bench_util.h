#pragma once
// Helpers shared by the tandem benchmarks: a reporter that keeps every run's time and throughput so
// main() can print ratios (fast vs reference, GEMV vs stream read) after the usual console table.
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace tandem::bench {

struct RunResult {
  double real_time_us = 0;     // per iteration
  double cpu_time_us = 0;       // per iteration; the whole process's with MeasureProcessCPUTime()
  double bytes_per_second = 0;  // 0 when the benchmark does not set it
  double items_per_second = 0;
};

class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      RunResult r;
      r.real_time_us = run.GetAdjustedRealTime() *
                       (1e6 / benchmark::GetTimeUnitMultiplier(run.time_unit));
      r.cpu_time_us = run.GetAdjustedCPUTime() *
                      (1e6 / benchmark::GetTimeUnitMultiplier(run.time_unit));
      if (auto it = run.counters.find("bytes_per_second"); it != run.counters.end()) {
        r.bytes_per_second = it->second;
      }
      if (auto it = run.counters.find("items_per_second"); it != run.counters.end()) {
        r.items_per_second = it->second;
      }
      // With --benchmark_repetitions the best run is kept: on a shared machine it is the one
      // least disturbed by other work.
      auto [it, inserted] = results_.emplace(run.benchmark_name(), r);
      if (!inserted && r.real_time_us < it->second.real_time_us) it->second = r;
    }
  }
  const std::map<std::string, RunResult>& results() const { return results_; }

 private:
  std::map<std::string, RunResult> results_;
};

// The run named `name` with the suffixes Google Benchmark appends for real time and process CPU
// time.
inline const RunResult* Find(const std::map<std::string, RunResult>& results,
                             const std::string& name) {
  for (const std::string& candidate :
       {name, name + "/real_time", name + "/process_time/real_time"}) {
    if (auto it = results.find(candidate); it != results.end()) return &it->second;
  }
  return nullptr;
}

}  // namespace tandem::bench
