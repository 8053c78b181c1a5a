// KV handoff throughput over UCX against UCX's own ucx_perftest put bandwidth, same machine, same
// transport, same message size, one run. Prints one line per block size with the ratio.
//
//   build/tests/perf/tandem_kv_handoff_bench [--tls tcp] [--blocks 64] [--rounds 40]
//
// Ours: a gated write (all blocks, then one 8-byte flag per block, as a prefill worker does)
// between two UCX agents, the receiver progressing on its own thread as a decode worker does.
// Reference: `ucx_perftest -t ucp_put_bw -s BLOCK_BYTES` server and client on 127.0.0.1.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tandem/transport/ucx_agent.h"

namespace {

using Clock = std::chrono::steady_clock;
using tandem::transport::GatedWrite;
using tandem::transport::TransferState;

struct Options {
  std::string tls = "tcp";
  int blocks = 64;
  int rounds = 40;
};

double OursMbPerSec(const Options& o, std::size_t block_bytes) {
  auto receiver = tandem::transport::CreateUcxAgent({o.tls});
  auto sender = tandem::transport::CreateUcxAgent({o.tls});
  if (!receiver.ok() || !sender.ok()) {
    std::fprintf(stderr, "UCX init failed\n");
    std::exit(1);
  }
  std::vector<std::uint8_t> pool(block_bytes * o.blocks), source(block_bytes * o.blocks, 7);
  std::vector<std::uint64_t> flags(o.blocks, 0);
  auto pool_reg = (*receiver)->RegisterMemory(pool.data(), pool.size());
  auto flag_reg = (*receiver)->RegisterMemory(flags.data(), flags.size() * 8);
  std::atomic<bool> stop{false};
  std::thread progress([&] {
    while (!stop.load()) (*receiver)->Progress();
  });
  GatedWrite w;
  w.peer_address = (*receiver)->local_address();
  w.regions = {(*pool_reg)->descriptor(), (*flag_reg)->descriptor()};
  const std::uint64_t flag_value = 1;
  for (int b = 0; b < o.blocks; ++b) {
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
  run_once();  // connection set-up and registration caches out of the timing
  const auto start = Clock::now();
  for (int r = 0; r < o.rounds; ++r) run_once();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  progress.join();
  return static_cast<double>(block_bytes) * o.blocks * o.rounds / secs / 1e6;
}

// Runs ucx_perftest as server and client and returns its overall put bandwidth (MB/s).
double PerftestMbPerSec(const Options& o, std::size_t block_bytes, int port) {
  const std::string env = "UCX_TLS=" + o.tls + " ";
  const std::string server = env + "timeout 60 ucx_perftest -p " + std::to_string(port) +
                             " >/dev/null 2>&1 &";
  if (std::system(server.c_str()) != 0) return -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int iters = o.blocks * o.rounds;
  const std::string client = env + "timeout 60 ucx_perftest 127.0.0.1 -p " + std::to_string(port) +
                             " -t ucp_put_bw -s " + std::to_string(block_bytes) + " -n " +
                             std::to_string(iters) + " 2>&1";
  FILE* pipe = popen(client.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 512> line{};
  double mbps = -1;
  while (fgets(line.data(), line.size(), pipe) != nullptr) {
    std::istringstream in(line.data());
    std::string first;
    in >> first;
    if (first != "Final:") continue;
    // Final: iterations, 3 latency columns, bandwidth average, bandwidth overall, 2 rates.
    double v[6] = {};
    for (double& x : v) in >> x;
    mbps = v[5];
  }
  pclose(pipe);
  return mbps;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tls") o.tls = argv[i + 1];
    else if (flag == "--blocks") o.blocks = std::atoi(argv[i + 1]);
    else if (flag == "--rounds") o.rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  // 20 KiB is one stories260K block (16 tokens x 5 layers x 64 floats); 1 MiB is the order of a
  // DeepSeek-V3 MLA block (16 tokens x 61 layers x 576 floats x 2 bytes).
  const std::size_t sizes[] = {20480, 1 << 20};
  std::printf("%-12s %14s %18s %8s\n", "block_bytes", "tandem MB/s", "ucx_perftest MB/s",
              "ratio");
  int port = 13400 + static_cast<int>(::getpid() % 500);
  for (std::size_t size : sizes) {
    Options run = o;
    if (size >= (1 << 20)) run.blocks = std::max(4, o.blocks / 8);
    const double ours = OursMbPerSec(run, size);
    const double ref = PerftestMbPerSec(run, size, port++);
    std::printf("%-12zu %14.1f %18.1f %8.2f\n", size, ours, ref, ref > 0 ? ours / ref : 0.0);
  }
  return 0;
}
