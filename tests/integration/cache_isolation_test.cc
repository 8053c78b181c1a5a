// Tenant-isolated prefix cache as processes on loopback (issue 17, item 4): the router with API
// keys of two tenants in front of two combined workers. The same long prompt from another tenant
// gets no cached tokens; from the same tenant it does; an explicit cache_salt splits a tenant's
// cache further; --prefix-cache-isolation shared shares again.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_processes.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::Proc;
using Clock = std::chrono::steady_clock;

const fs::path kShared(TANDEM_SHARED_DIR);
const fs::path kModel = kShared / "models" / "stories260K";

// SHA-256 hex of the test keys (printf KEY | sha256sum).
constexpr const char* kKeyA = "tdm-tenant-a-key";
constexpr const char* kKeyB = "tdm-tenant-b-key";

class CacheIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    dir_ = fs::temp_directory_path() /
           ("tandem_salt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream keys(dir_ / "keys.jsonl");
    for (const auto& [key, tenant] : {std::pair{kKeyA, "tenant-a"}, std::pair{kKeyB, "tenant-b"}}) {
      keys << json{{"key_sha256", Sha256Hex(key)}, {"tenant", tenant}}.dump() << "\n";
    }
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  static std::string Sha256Hex(const std::string& text) {
    // The test links no crypto library: sha256sum is in coreutils.
    const std::string cmd = "printf '%s' '" + text + "' | sha256sum";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[65] = {};
    if (p == nullptr || fread(buf, 1, 64, p) != 64) ADD_FAILURE() << "sha256sum failed";
    if (p != nullptr) pclose(p);
    return std::string(buf, 64);
  }

  void StartCluster(const std::string& isolation, bool disaggregated = false) {
    testing::StartProc(&router_, dir_, TANDEM_ROUTER_BIN, "router", kModel,
                       {"--http-listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
                        "--api-keys-file", (dir_ / "keys.jsonl").string(),
                        "--prefix-cache-isolation", isolation, "--routing-policy", "tandem"});
    for (int i = 0; i < 2; ++i) {
      workers_.push_back(std::make_unique<Proc>());
      const char* binary = !disaggregated ? TANDEM_WORKER_BIN
                           : i == 0       ? TANDEM_PREFILL_BIN
                                          : TANDEM_DECODE_BIN;
      testing::StartProc(workers_.back().get(), dir_, binary,
                         "worker" + std::to_string(i), kModel,
                         {"--threads", "1", "--router",
                          "127.0.0.1:" + std::to_string(router_.ports[1]), "--heartbeat-ms",
                          "200", "--kv-host-mb", "0"});
    }
    const auto deadline = Clock::now() + seconds(30);
    while (Clock::now() < deadline &&
           testing::HttpRequest(router_.ports[0], "GET", "/ready").status != 200) {
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_EQ(testing::HttpRequest(router_.ports[0], "GET", "/ready").status, 200)
        << router_.process.log();
  }

  // Cached prompt tokens the completion's usage reports.
  int Cached(const char* key, const std::string& prompt, const std::string& cache_salt = "") {
    json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
    if (!cache_salt.empty()) body["cache_salt"] = cache_salt;
    HttpConnection c(router_.ports[0]);
    const std::string text = body.dump();
    c.Send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
              std::string(key) + "\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text);
    HttpResponse r;
    EXPECT_TRUE(c.ReadHead(&r));
    r.body = c.ReadWholeBody();
    EXPECT_EQ(r.status, 200) << r.body;
    const json answer = json::parse(r.body, nullptr, false);
    if (!answer.is_object() || !answer.contains("usage")) return -1;
    // Settle: the worker's KV events reach the router's index before the next request.
    std::this_thread::sleep_for(milliseconds(300));
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  }

  static std::string Prompt(int i) {
    std::string p = "Story " + std::to_string(i) + ": ";
    while (p.size() < 400) p += "Once upon a time there was a little girl who liked to play. ";
    return p;
  }

  fs::path dir_;
  Proc router_;
  std::vector<std::unique_ptr<Proc>> workers_;
};

TEST_F(CacheIsolationTest, TenantsNeverHitEachOthersPrefixesAndEachHitsItsOwn) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("auto"));
  // Three prompts, two workers. That the router routes a salted repeat by the salted chain the
  // workers publish is PrefixRoutingTest.SaltedRequestsFollowOnlyTheBlocksOfTheirSaltedChain's
  // (with equal loads the fallback places repeats on the same worker here anyway).
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const std::string prompt = Prompt(i);
    EXPECT_EQ(Cached(kKeyA, prompt), 0);
    EXPECT_GT(Cached(kKeyA, prompt), 0) << "the same tenant hits";
    EXPECT_EQ(Cached(kKeyB, prompt), 0) << "another tenant must not";
    EXPECT_GT(Cached(kKeyB, prompt), 0) << "and then hits its own";
    EXPECT_EQ(Cached(kKeyA, prompt, "private"), 0) << "a cache_salt splits the tenant's cache";
    EXPECT_GT(Cached(kKeyA, prompt, "private"), 0);
    EXPECT_EQ(Cached(kKeyB, prompt, "private"), 0) << "the same salt under another tenant";
  }
}

// The key file re-read on a real SIGHUP to the router process: a revoked key is refused from
// then on while its stream already running finishes; a new key is served.
TEST_F(CacheIsolationTest, SighupRevokesAndAddsKeysWhileARevokedKeysStreamFinishes) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("auto"));
  HttpConnection stream(router_.ports[0]);
  const std::string body =
      json{{"prompt", Prompt(3)}, {"max_tokens", 60}, {"temperature", 0}, {"stream", true}}.dump();
  ASSERT_TRUE(stream.Send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                          std::string(kKeyA) + "\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) +
                          "\r\nConnection: close\r\n\r\n" + body));
  HttpResponse head;
  ASSERT_TRUE(stream.ReadHead(&head));
  ASSERT_NE(head.headers.find(" 200 "), std::string::npos) << head.headers;

  {
    std::ofstream keys(dir_ / "keys.jsonl.new");
    keys << json{{"key_sha256", Sha256Hex(kKeyB)}, {"tenant", "tenant-b"}}.dump() << "\n"
         << json{{"key_sha256", Sha256Hex("tdm-new-key")}, {"tenant", "tenant-c"}}.dump() << "\n";
  }
  fs::rename(dir_ / "keys.jsonl.new", dir_ / "keys.jsonl");
  ASSERT_EQ(::kill(router_.process.pid(), SIGHUP), 0);
  auto status = [&](const std::string& key) {
    HttpConnection c(router_.ports[0]);
    const std::string text = json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump();
    c.Send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + key +
           "\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text);
    HttpResponse r;
    if (!c.ReadHead(&r)) return 0;
    r.body = c.ReadWholeBody();
    return r.status;
  };
  const auto deadline = Clock::now() + seconds(5);
  while (status(kKeyA) != 401 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(status(kKeyA), 401) << router_.process.log();
  EXPECT_EQ(status("tdm-new-key"), 200);
  EXPECT_EQ(status(kKeyB), 200);
  const std::string rest = stream.ReadWholeBody();
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << "the revoked key's stream was cut";
  EXPECT_TRUE(router_.process.running()) << "SIGHUP must not stop the router";
  EXPECT_NE(router_.process.log().find("SIGHUP: API keys re-read"), std::string::npos);
}

// Prefill + decode: the prefill computes under the tenant's chain, the decode registers the KV
// it receives under the same chain (both are sent the root).
TEST_F(CacheIsolationTest, DisaggregatedTenantsNeverHitEachOthersPrefixes) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("auto", /*disaggregated=*/true));
  const std::string prompt = Prompt(5);
  EXPECT_EQ(Cached(kKeyA, prompt), 0);
  EXPECT_GT(Cached(kKeyA, prompt), 0) << "the same tenant hits";
  EXPECT_EQ(Cached(kKeyB, prompt), 0) << "another tenant must not";
  EXPECT_GT(Cached(kKeyB, prompt), 0);
}

TEST_F(CacheIsolationTest, SharedModeSharesPrefixesAcrossTenants) {
  ASSERT_NO_FATAL_FAILURE(StartCluster("shared"));
  const std::string prompt = Prompt(7);
  EXPECT_EQ(Cached(kKeyA, prompt), 0);
  EXPECT_GT(Cached(kKeyB, prompt), 0) << "shared: the other tenant's prefix is reused";
  EXPECT_EQ(Cached(kKeyB, prompt, "s"), 0) << "a cache_salt still separates";
  EXPECT_GT(Cached(kKeyA, prompt, "s"), 0) << "shared: the same salt shares across tenants";
}

}  // namespace
}  // namespace tandem
