// What mutual TLS on the control plane costs, against plaintext in the same run (issue 17):
// two disaggregated clusters on loopback (tandem-router + tandem-prefill + tandem-decode), one
// plaintext and one with --tls-cert/--tls-key/--tls-ca from certificates openssl makes here.
//  - request path: the same streamed completion through each router (HTTP -> router -> ReserveKv
//    on the decode, Prefill with the KV target, Generate stream), so every KV handoff control
//    message of the request crosses TLS in the second cluster;
//  - KV handoff control messages alone: ReserveKv + Cancel round trips straight to each decode
//    over a long-lived channel (what the router sends per request before the prefill).
// The two are interleaved request by request so machine noise hits both alike; prints means,
// medians, p99 and the TLS / plaintext ratios.
//
//   build/tests/perf/tandem_tls_bench [--requests 200] [--control 2000] [--max-tokens 8]
//
// Needs the stories260K model (TANDEM_SHARED_DIR at build time, or --model DIR) and openssl.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../integration/child_process.h"
#include "../integration/http_client.h"
#include "tandem/security/tls.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tandem::testing::ChildProcess;

bool Sh(const fs::path& dir, const std::string& command) {
  return std::system(("cd '" + dir.string() + "' && (" + command + ") >> openssl.log 2>&1").c_str()) == 0;
}

bool MakeCerts(const fs::path& dir) {
  std::ofstream(dir / "ext.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                    "extendedKeyUsage=serverAuth,clientAuth\n";
  if (!Sh(dir, "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
               "-keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca")) {
    return false;
  }
  for (const char* name : {"node"}) {
    const std::string n = name;
    if (!Sh(dir, "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                     n + ".key -out " + n + ".csr -subj /CN=" + n) ||
        !Sh(dir, "openssl x509 -req -in " + n + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                 "-out " + n + ".pem -days 2 -extfile ext.cnf")) {
      return false;
    }
  }
  return true;
}

struct Cluster {
  ChildProcess router, prefill, decode;
  std::vector<int> rports, pports, dports;
  std::unique_ptr<tandem::v1::Worker::Stub> decode_stub;
};

bool StartCluster(Cluster* c, const fs::path& dir, const std::string& name, const std::string& model,
                  const std::vector<std::string>& tls) {
  auto args = [&](std::vector<std::string> a) {
    a.insert(a.end(), tls.begin(), tls.end());
    return a;
  };
  c->router.Start(args({TANDEM_ROUTER_BIN, "--model", model, "--http-listen", "127.0.0.1:0",
                        "--control-listen", "127.0.0.1:0", "--port-file",
                        (dir / (name + "-router.port")).string()}),
                  (dir / (name + "-router.log")).string());
  c->rports = tandem::testing::WaitForPorts(dir / (name + "-router.port"), std::chrono::seconds(30));
  if (c->rports.size() != 2) {
    std::fprintf(stderr, "%s router did not start:\n%s\n", name.c_str(), c->router.log().c_str());
    return false;
  }
  const std::string control = "127.0.0.1:" + std::to_string(c->rports[1]);
  for (auto [proc, bin, role, ports] :
       {std::tuple{&c->prefill, TANDEM_PREFILL_BIN, "prefill", &c->pports},
        std::tuple{&c->decode, TANDEM_DECODE_BIN, "decode", &c->dports}}) {
    const std::string base = name + "-" + role;
    proc->Start(args({bin, "--model", model, "--threads", "1", "--router", control,
                      "--port-file", (dir / (base + ".port")).string()}),
                (dir / (base + ".log")).string());
    *ports = tandem::testing::WaitForPorts(dir / (base + ".port"), std::chrono::seconds(30));
    if (ports->size() != 2) {
      std::fprintf(stderr, "%s did not start:\n%s\n", base.c_str(), proc->log().c_str());
      return false;
    }
  }
  for (int i = 0; i < 600; ++i) {
    if (tandem::testing::HttpRequest(c->rports[0], "GET", "/ready").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "%s cluster not ready:\n%s\n", name.c_str(), c->router.log().c_str());
  return false;
}

struct Stats {
  std::vector<double> us;
  double Mean() const {
    double s = 0;
    for (double v : us) s += v;
    return us.empty() ? 0 : s / static_cast<double>(us.size());
  }
  double Quantile(double q) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * static_cast<double>(us.size())))];
  }
};

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  int requests = 200, control = 2000, max_tokens = 8;
  std::string model = std::string(TANDEM_SHARED_DIR) + "/models/stories260K";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") requests = std::atoi(argv[i + 1]);
    else if (flag == "--control") control = std::atoi(argv[i + 1]);
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
  const fs::path dir = fs::temp_directory_path() / ("tandem_tls_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  if (!MakeCerts(dir)) {
    std::fprintf(stderr, "openssl failed (see %s/openssl.log)\n", dir.c_str());
    return 1;
  }
  tandem::security::TlsConfig tls;
  tls.cert_file = (dir / "node.pem").string();
  tls.key_file = (dir / "node.key").string();
  tls.ca_file = (dir / "ca.pem").string();
  const std::vector<std::string> tls_flags = {"--tls-cert", tls.cert_file, "--tls-key",
                                              tls.key_file, "--tls-ca", tls.ca_file,
                                              "--tls-required"};
  Cluster plain, secure;
  if (!StartCluster(&plain, dir, "plain", model, {}) ||
      !StartCluster(&secure, dir, "tls", model, tls_flags)) {
    return 1;
  }
  plain.decode_stub = tandem::v1::Worker::NewStub(tandem::security::CreateChannel(
      "127.0.0.1:" + std::to_string(plain.dports[0]), tandem::security::TlsConfig{}));
  secure.decode_stub = tandem::v1::Worker::NewStub(
      tandem::security::CreateChannel("127.0.0.1:" + std::to_string(secure.dports[0]), tls));

  const std::string body = "{\"prompt\":[1,403,407,261,378],\"max_tokens\":" +
                           std::to_string(max_tokens) + ",\"temperature\":0,\"stream\":true}";
  int failures = 0;
  auto request_once = [&](Cluster& c) {
    const auto t0 = Clock::now();
    const auto r = tandem::testing::HttpRequest(c.rports[0], "POST", "/v1/completions", body);
    if (r.status != 200 || r.body.find("[DONE]") == std::string::npos) ++failures;
    return Micros(Clock::now() - t0);
  };
  auto control_once = [&](Cluster& c, int i) {
    const std::string id = "bench-ctl-" + std::to_string(i);
    const auto t0 = Clock::now();
    {
      grpc::ClientContext ctx;
      tandem::v1::ReserveKvRequest req;
      req.set_request_id(id);
      req.set_num_tokens(64);
      req.set_lease_ms(5000);
      tandem::v1::ReserveKvResponse resp;
      if (!c.decode_stub->ReserveKv(&ctx, req, &resp).ok()) ++failures;
    }
    {
      grpc::ClientContext ctx;
      tandem::v1::CancelRequest req;
      req.set_request_id(id);
      tandem::v1::CancelResponse resp;
      if (!c.decode_stub->Cancel(&ctx, req, &resp).ok()) ++failures;
    }
    return Micros(Clock::now() - t0);
  };
  for (int i = 0; i < 20; ++i) {  // warm connections, allocators, caches on both sides
    request_once(plain);
    request_once(secure);
    control_once(plain, -1 - i);
    control_once(secure, -1 - i);
  }
  failures = 0;
  Stats req_plain, req_tls, ctl_plain, ctl_tls;
  for (int i = 0; i < requests; ++i) {
    req_plain.us.push_back(request_once(plain));
    req_tls.us.push_back(request_once(secure));
  }
  for (int i = 0; i < control; ++i) {
    ctl_plain.us.push_back(control_once(plain, i));
    ctl_tls.us.push_back(control_once(secure, i));
  }
  std::printf("requests=%d (streamed completion, max_tokens=%d, prefill + decode) control=%d "
              "(ReserveKv + Cancel) failures=%d\n",
              requests, max_tokens, control, failures);
  std::printf("%-34s %10s %10s %10s\n", "", "mean us", "p50 us", "p99 us");
  auto row = [](const char* name, Stats& s) {
    std::printf("%-34s %10.1f %10.1f %10.1f\n", name, s.Mean(), s.Quantile(0.5), s.Quantile(0.99));
  };
  row("request path, plaintext", req_plain);
  row("request path, mutual TLS", req_tls);
  row("handoff control msgs, plaintext", ctl_plain);
  row("handoff control msgs, mutual TLS", ctl_tls);
  std::printf("ratio TLS/plaintext: request path %.3f (mean) %.3f (p50); control messages %.3f "
              "(mean) %.3f (p50)\n",
              req_tls.Mean() / req_plain.Mean(), req_tls.Quantile(0.5) / req_plain.Quantile(0.5),
              ctl_tls.Mean() / ctl_plain.Mean(), ctl_tls.Quantile(0.5) / ctl_plain.Quantile(0.5));
  for (Cluster* c : {&plain, &secure}) {
    c->decode_stub.reset();
    c->router.Kill(SIGTERM);
    c->prefill.Kill(SIGTERM);
    c->decode.Kill(SIGTERM);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return failures == 0 ? 0 : 1;
}
