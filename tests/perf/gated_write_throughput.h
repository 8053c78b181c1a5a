#pragma once
// MB/s of a KV handoff's transfer as a prefill worker makes it: a gated write (every block, then
// one 8-byte flag per block) between two UCX agents, the receiver progressing on its own thread
// as a decode worker does. One round untimed (connection set-up and registration caches), then
// `rounds` timed. Exits the benchmark on a transport failure. Shared by the benchmarks that
// compare other transfers against the KV path.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tandem/transport/ucx_agent.h"

namespace tandem::bench {

inline double GatedWriteMbPerSec(const std::string& transports, int blocks,
                                 std::size_t block_bytes, int rounds) {
  using transport::GatedWrite;
  using transport::TransferState;
  auto receiver = transport::CreateUcxAgent({transports});
  auto sender = transport::CreateUcxAgent({transports});
  if (!receiver.ok() || !sender.ok()) {
    std::fprintf(stderr, "UCX init failed\n");
    std::exit(1);
  }
  std::vector<std::uint8_t> pool(block_bytes * blocks), source(block_bytes * blocks, 7);
  std::vector<std::uint64_t> flags(blocks, 0);
  auto pool_reg = (*receiver)->RegisterMemory(pool.data(), pool.size());
  auto flag_reg = (*receiver)->RegisterMemory(flags.data(), flags.size() * 8);
  if (!pool_reg.ok() || !flag_reg.ok()) {
    std::fprintf(stderr, "UCX registration failed\n");
    std::exit(1);
  }
  std::atomic<bool> stop{false};
  std::thread progress([&] {
    while (!stop.load()) (*receiver)->Progress();
  });
  GatedWrite w;
  w.peer_address = (*receiver)->local_address();
  w.regions = {(*pool_reg)->descriptor(), (*flag_reg)->descriptor()};
  const std::uint64_t flag_value = 1;
  for (int b = 0; b < blocks; ++b) {
    w.data.push_back({source.data() + b * block_bytes, block_bytes, 0,
                      w.regions[0].base + b * block_bytes});
    w.flags.push_back({&flag_value, 8, 1, w.regions[1].base + b * 8});
  }
  auto run_once = [&] {
    auto id = (*sender)->StartGatedWrite(w);
    if (!id.ok()) std::exit(1);
    for (;;) {
      auto st = (*sender)->Poll(*id);
      if (st.state == TransferState::kDone) break;
      if (st.state == TransferState::kFailed) {
        std::fprintf(stderr, "transfer failed: %s\n", std::string(st.cause.message()).c_str());
        std::exit(1);
      }
    }
    (*sender)->Release(*id);
  };
  run_once();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) run_once();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  progress.join();
  return static_cast<double>(block_bytes) * blocks * rounds / secs / 1e6;
}

}  // namespace tandem::bench
