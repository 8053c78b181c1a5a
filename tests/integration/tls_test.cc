// Mutual TLS of the control plane as processes on loopback (issue 17, item 3), with certificates
// made by openssl at test time: a worker whose certificate the cluster CA signed registers and
// serves; one without a certificate, or with one from another CA, is refused and never receives
// a prompt; a plaintext client cannot reach the router's control port; a router told TLS is
// mandatory does not start without it.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_processes.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "http_get.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/router_control.grpc.pb.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::HttpRequest;
using testing::Proc;
using Clock = std::chrono::steady_clock;

const fs::path kShared(TANDEM_SHARED_DIR);
const fs::path kModel = kShared / "models" / "stories260K";

// Runs a shell command in `dir`; false (with its output in the log) when it fails.
bool Sh(const fs::path& dir, const std::string& command) {
  const std::string line = "cd '" + dir.string() + "' && (" + command + ") >> openssl.log 2>&1";
  return std::system(line.c_str()) == 0;
}

struct Certs {
  static constexpr const char* kExt =
      "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
      "extendedKeyUsage=serverAuth,clientAuth\n";

  // A CA named `ca` (ca.pem, ca.key) in `dir`.
  static bool MakeCa(const fs::path& dir, const std::string& ca) {
    return Sh(dir, "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-keyout " + ca + ".key -out " + ca + ".pem -days 2 -subj /CN=" + ca);
  }
  // name.pem / name.key signed by `ca`, valid for 127.0.0.1 and localhost.
  static bool MakeLeaf(const fs::path& dir, const std::string& name, const std::string& ca) {
    std::ofstream(dir / "ext.cnf") << kExt;
    return Sh(dir, "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                       name + ".key -out " + name + ".csr -subj /CN=" + name) &&
           Sh(dir, "openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
                       ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile ext.cnf");
  }
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl";
    dir_ = fs::temp_directory_path() /
           ("tandem_tls_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    ASSERT_TRUE(Certs::MakeCa(dir_, "ca") && Certs::MakeCa(dir_, "otherca") &&
                Certs::MakeLeaf(dir_, "router", "ca") && Certs::MakeLeaf(dir_, "worker", "ca") &&
                Certs::MakeLeaf(dir_, "intruder", "otherca"))
        << Log("openssl.log");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  std::string Path(const std::string& file) const { return (dir_ / file).string(); }
  std::string Log(const std::string& file) const {
    std::ifstream in(dir_ / file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::vector<std::string> Tls(const std::string& name, const std::string& ca) const {
    return {"--tls-cert", Path(name + ".pem"), "--tls-key", Path(name + ".key"), "--tls-ca",
            Path(ca + ".pem")};
  }

  void StartRouter() {
    std::vector<std::string> args = {"--http-listen", "127.0.0.1:0", "--control-listen",
                                     "127.0.0.1:0", "--worker-lease-ms", "1500",
                                     "--tls-required"};
    for (const std::string& a : Tls("router", "ca")) args.push_back(a);
    testing::StartProc(&router_, dir_, TANDEM_ROUTER_BIN, "router", kModel, args);
  }
  void StartWorker(Proc* p, const std::string& name, std::vector<std::string> tls) {
    std::vector<std::string> args = {"--threads", "1", "--router",
                                     "127.0.0.1:" + std::to_string(router_.ports[1]),
                                     "--heartbeat-ms", "200"};
    args.insert(args.end(), tls.begin(), tls.end());
    testing::StartProc(p, dir_, TANDEM_WORKER_BIN, name, kModel, args);
  }
  int http() const { return router_.ports[0]; }
  bool WaitReady(seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (HttpRequest(http(), "GET", "/ready").status == 200) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }
  double WorkerMetric(const Proc& w, const std::string& name) {
    return testing::MetricValue(testing::HttpGet(w.ports[1], "/metrics"), name);
  }
  testing::HttpResponse Complete() {
    return HttpRequest(http(), "POST", "/v1/completions",
                       json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}
                           .dump());
  }
  // A refused worker: up (it serves its own metrics), but never registered, and after a while of
  // trying it has still been sent no prompt while the router answers 503.
  void ExpectRefused(Proc* w, const std::string& name) {
    SCOPED_TRACE(name);
    std::this_thread::sleep_for(seconds(2));  // ten heartbeat periods of retries
    EXPECT_FALSE(HttpRequest(http(), "GET", "/ready").status == 200);
    EXPECT_EQ(WorkerMetric(*w, "tandem_worker_routers_registered"), 0.0) << w->process.log();
    const testing::HttpResponse r = Complete();
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(WorkerMetric(*w, "tandem_worker_prefill_tokens_total"), 0.0) << "it got a prompt";
    EXPECT_TRUE(w->process.running()) << w->process.log();
  }

  fs::path dir_;
  Proc router_;
};

TEST_F(TlsTest, AWorkerWithACertificateTheCaSignedRegistersAndServes) {
  ASSERT_NO_FATAL_FAILURE(StartRouter());
  Proc worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker", Tls("worker", "ca")));
  ASSERT_TRUE(WaitReady(seconds(30))) << router_.process.log() << worker.process.log();
  const testing::HttpResponse r = Complete();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(json::parse(r.body)["choices"][0]["text"].get<std::string>().empty());
  EXPECT_GT(WorkerMetric(worker, "tandem_worker_prefill_tokens_total"), 0.0);
  // The worker's own service takes no call without a certificate the CA signed.
  const std::string endpoint = "127.0.0.1:" + std::to_string(worker.ports[0]);
  for (bool with_other_ca : {false, true}) {
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (with_other_ca) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = Log("ca.pem");
      ssl.pem_cert_chain = Log("intruder.pem");
      ssl.pem_private_key = Log("intruder.key");
      creds = grpc::SslCredentials(ssl);
    }
    auto stub = v1::Worker::NewStub(grpc::CreateChannel(endpoint, creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    v1::CancelRequest cancel;
    cancel.set_request_id("x");
    v1::CancelResponse response;
    EXPECT_EQ(stub->Cancel(&ctx, cancel, &response).error_code(), grpc::StatusCode::UNAVAILABLE)
        << (with_other_ca ? "another CA's client certificate" : "plaintext");
  }
}

TEST_F(TlsTest, AWorkerWithoutACertificateIsRefusedAndNeverGetsAPrompt) {
  ASSERT_NO_FATAL_FAILURE(StartRouter());
  Proc plain;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&plain, "plain", {}));
  ExpectRefused(&plain, "plaintext worker");
  // It trusts the CA but has no certificate of its own: the TLS handshake still fails.
  // (A worker cannot be given --tls-ca alone: it refuses to start.)
  Proc half;
  half.process.Start({TANDEM_WORKER_BIN, "--model", kModel.string(), "--tls-ca", Path("ca.pem"),
                      "--router", "127.0.0.1:" + std::to_string(router_.ports[1])},
                     Path("half.log"));
  EXPECT_EQ(half.process.WaitExit(seconds(30)), 2) << half.process.log();
}

TEST_F(TlsTest, AWorkerWithACertificateFromAnotherCaIsRefusedAndNeverGetsAPrompt) {
  ASSERT_NO_FATAL_FAILURE(StartRouter());
  // It trusts the cluster CA (so it would accept the router), but its own certificate is not the
  // cluster's: the router refuses the handshake.
  Proc intruder;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&intruder, "intruder", Tls("intruder", "ca")));
  ExpectRefused(&intruder, "another CA's certificate");
  // A valid worker beside it is served, and the intruder still gets nothing.
  Proc worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker", Tls("worker", "ca")));
  ASSERT_TRUE(WaitReady(seconds(30))) << router_.process.log();
  for (int i = 0; i < 3; ++i) {
    const testing::HttpResponse r = Complete();
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(WorkerMetric(intruder, "tandem_worker_prefill_tokens_total"), 0.0);
  EXPECT_GT(WorkerMetric(worker, "tandem_worker_prefill_tokens_total"), 0.0);
}

TEST_F(TlsTest, APlaintextClientCannotReachTheControlPort) {
  ASSERT_NO_FATAL_FAILURE(StartRouter());
  const std::string control = "127.0.0.1:" + std::to_string(router_.ports[1]);
  v1::WorkerInfo info;
  info.set_worker_id("rogue");
  info.set_role(v1::WORKER_ROLE_COMBINED);
  info.set_model("stories260K");
  info.set_grpc_endpoint("127.0.0.1:1");
  info.set_kv_block_size(16);
  info.set_kv_hash_scheme("chained-fnv1a-splitmix64/v1");
  info.set_max_context(512);
  info.set_incarnation(7);
  v1::RegisterWorkerRequest request;
  *request.mutable_worker() = info;
  {
    auto stub = v1::RouterControl::NewStub(
        grpc::CreateChannel(control, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    v1::RegisterWorkerResponse response;
    const grpc::Status st = stub->RegisterWorker(&ctx, request, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  }
  {
    // TLS that verifies the router but presents no client certificate: refused as well.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Log("ca.pem");
    auto stub = v1::RouterControl::NewStub(grpc::CreateChannel(control, grpc::SslCredentials(ssl)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    v1::RegisterWorkerResponse response;
    const grpc::Status st = stub->RegisterWorker(&ctx, request, &response);
    EXPECT_FALSE(st.ok());
  }
  EXPECT_EQ(testing::HttpGet(http(), "/metrics").find("rogue"), std::string::npos);
}

TEST_F(TlsTest, MandatoryTlsWithoutCertificatesStopsTheStart) {
  Proc router;
  router.process.Start({TANDEM_ROUTER_BIN, "--model", kModel.string(), "--http-listen",
                        "127.0.0.1:0", "--control-listen", "127.0.0.1:0", "--tls-required"},
                       Path("router-bare.log"));
  const std::optional<int> code = router.process.WaitExit(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(router.process.log().find("--tls-required"), std::string::npos) << router.process.log();
  // A key that is not the certificate's is caught at the start too.
  Proc mismatched;
  mismatched.process.Start({TANDEM_ROUTER_BIN, "--model", kModel.string(), "--http-listen",
                            "127.0.0.1:0", "--control-listen", "127.0.0.1:0", "--tls-cert",
                            Path("router.pem"), "--tls-key", Path("worker.key"), "--tls-ca",
                            Path("ca.pem")},
                           Path("router-mismatch.log"));
  ASSERT_TRUE(mismatched.process.WaitExit(seconds(30)).has_value());
  EXPECT_NE(mismatched.process.log().find("is not the key of"), std::string::npos)
      << mismatched.process.log();
}

}  // namespace
}  // namespace tandem
