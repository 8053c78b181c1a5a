// Router overhead per request: the same small completion sent N times through tandem-router
// (HTTP + tokenisation + dispatch + SSE/JSON) and straight to the worker's gRPC Generate, against
// one tandem-worker process, in one run. Prints mean latencies and their ratio.
//
//   build/tests/perf/tandem_router_overhead_bench [--requests 300] [--max-tokens 8]
//
// Needs the stories260K model (TANDEM_SHARED_DIR at build time, or --model DIR).

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "../integration/child_process.h"
#include "../integration/http_client.h"
#include "grpcpp/create_channel.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tandem::testing::ChildProcess;

double MeanMicros(Clock::duration total, int n) {
  return std::chrono::duration<double, std::micro>(total).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 300;
  int max_tokens = 8;
  std::string model = std::string(TANDEM_SHARED_DIR) + "/models/stories260K";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") requests = std::atoi(argv[i + 1]);
    else if (flag == "--max-tokens") max_tokens = std::atoi(argv[i + 1]);
    else if (flag == "--model") model = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (!fs::exists(fs::path(model) / "model.bin")) {
    std::fprintf(stderr, "model not found at %s (pass --model DIR)\n", model.c_str());
    return 1;
  }
  const fs::path dir = fs::temp_directory_path() / ("tandem_router_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ChildProcess router, worker;
  router.Start({TANDEM_ROUTER_BIN, "--model", model, "--http-listen", "127.0.0.1:0",
                "--control-listen", "127.0.0.1:0", "--port-file", (dir / "router.port").string()},
               (dir / "router.log").string());
  const auto rports = tandem::testing::WaitForPorts(dir / "router.port", std::chrono::seconds(30));
  if (rports.size() != 2) {
    std::fprintf(stderr, "router did not start:\n%s\n", router.log().c_str());
    return 1;
  }
  worker.Start({TANDEM_WORKER_BIN, "--model", model, "--threads", "1", "--router",
                "127.0.0.1:" + std::to_string(rports[1]), "--port-file",
                (dir / "worker.port").string()},
               (dir / "worker.log").string());
  const auto wports = tandem::testing::WaitForPorts(dir / "worker.port", std::chrono::seconds(30));
  if (wports.size() != 2) {
    std::fprintf(stderr, "worker did not start:\n%s\n", worker.log().c_str());
    return 1;
  }
  for (int i = 0; i < 300 && tandem::testing::HttpRequest(rports[0], "GET", "/ready").status != 200;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // Both paths generate from the same prompt ids ("Once upon a time") with the same parameters.
  const std::vector<int> prompt_ids = {1, 403, 407, 261, 378};
  const std::string body = "{\"prompt\":[1,403,407,261,378],\"max_tokens\":" +
                           std::to_string(max_tokens) +
                           ",\"temperature\":0,\"stream\":true}";
  auto stub = tandem::v1::Worker::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(wports[0]), grpc::InsecureChannelCredentials()));
  auto direct_once = [&](int i) {
    tandem::v1::GenerateRequest req;
    req.set_request_id("bench-" + std::to_string(i));
    for (int t : prompt_ids) req.add_prompt_token_ids(t);
    req.mutable_sampling()->set_max_tokens(max_tokens);
    req.mutable_sampling()->set_ignore_eos(true);
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, req);
    tandem::v1::GenerateResponse msg;
    int tokens = 0;
    while (reader->Read(&msg)) tokens += msg.token_ids_size();
    return reader->Finish().ok() && tokens > 0;
  };
  auto routed_once = [&] {
    const auto r = tandem::testing::HttpRequest(rports[0], "POST", "/v1/completions", body);
    return r.status == 200 && r.body.find("[DONE]") != std::string::npos;
  };
  for (int i = 0; i < 20; ++i) {  // warm both paths (connections, allocator, caches)
    direct_once(-1 - i);
    routed_once();
  }
  // Interleave the two so machine noise hits both alike.
  Clock::duration direct{}, routed{};
  int failures = 0;
  for (int i = 0; i < requests; ++i) {
    auto t0 = Clock::now();
    failures += direct_once(i) ? 0 : 1;
    auto t1 = Clock::now();
    failures += routed_once() ? 0 : 1;
    auto t2 = Clock::now();
    direct += t1 - t0;
    routed += t2 - t1;
  }
  const double d = MeanMicros(direct, requests), r = MeanMicros(routed, requests);
  std::printf("requests=%d max_tokens=%d failures=%d\n", requests, max_tokens, failures);
  std::printf("direct gRPC Generate   mean %8.1f us\n", d);
  std::printf("through tandem-router  mean %8.1f us\n", r);
  std::printf("router overhead        %8.1f us per request, ratio routed/direct %.2f\n", r - d,
              r / d);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return failures == 0 ? 0 : 1;
}
