#pragma once

#include <vector>

namespace tandem::sim {

// Nearest-rank percentile (the smallest value with at least p of the samples at or below it);
// 0 for no samples. Sorts `values`.
double Percentile(std::vector<double>& values, double p);

}  // namespace tandem::sim
