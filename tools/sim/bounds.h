#pragma once

#include <cstdint>
#include <vector>

#include "simulator.h"
#include "trace.h"

namespace tandem::sim {

// What no router can beat, from the trace and the cost model alone. `misses` is, per request
// (trace order), what one infinite cache shared by all workers would miss
// (InfiniteCacheMisses).

// p90 TTFT with every request alone on the fastest worker, computing only its misses: the floor.
double TtftP90Floor(const Trace& trace, const SimConfig& config,
                    const std::vector<std::int64_t>& misses);

// p90 TTFT of an oracle cluster: one infinite cache shared by every prefill worker (a request
// computes only its misses wherever it runs) and one central first-come-first-served queue (each
// request goes, in arrival order, to the worker that would finish it first). It has every
// advantage placement can buy and none a queue order can, so a router with a hold queue may beat
// it; no router can beat the floor.
double TtftP90Oracle(const Trace& trace, const SimConfig& config,
                     const std::vector<std::int64_t>& misses);

}  // namespace tandem::sim
