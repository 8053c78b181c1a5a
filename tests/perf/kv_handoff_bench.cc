// KV handoff throughput over UCX against UCX's own ucx_perftest put bandwidth, same machine, same
// transport, same message size, one run. Prints one line per block size with the ratio.
//
//   build/tests/perf/tandem_kv_handoff_bench [--tls tcp] [--blocks 64] [--rounds 40]
//
// Ours: a gated write (all blocks, then one 8-byte flag per block, as a prefill worker does)
// between two UCX agents, the receiver progressing on its own thread as a decode worker does.
// Reference: `ucx_perftest -t ucp_put_bw -s BLOCK_BYTES` server and client on 127.0.0.1.

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gated_write_throughput.h"

namespace {


struct Options {
  std::string tls = "tcp";
  int blocks = 64;
  int rounds = 40;
};

double OursMbPerSec(const Options& o, std::size_t block_bytes) {
  return tandem::bench::GatedWriteMbPerSec(o.tls, o.blocks, block_bytes, o.rounds);
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
