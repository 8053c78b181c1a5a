// Prefill and decode as separate processes, KV moved between them over UCX, driven through
// their gRPC API the way the router drives them. Proves the handoff is lossless (exact llama2.c
// tokens) and that a dead prefill strands no decode memory.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "http_get.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::ChildProcess;

const fs::path kShared(TANDEM_SHARED_DIR);

struct Worker {
  ChildProcess process;
  int grpc_port = 0;
  int metrics_port = 0;
  std::unique_ptr<v1::Worker::Stub> stub;
};

class KvHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kShared / "models" / "stories260K" / "model.bin")) {
      GTEST_SKIP() << "stories260K not found under " << kShared;
    }
    dir_ = fs::temp_directory_path() /
           ("tandem_kv_handoff_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void StartWorker(Worker* w, const std::string& binary, const std::string& name) {
    const fs::path port_file = dir_ / (name + ".port");
    fs::remove(port_file);
    ASSERT_TRUE(w->process.Start(
        {binary, "--model", (kShared / "models" / "stories260K").string(), "--threads", "1",
         "--port-file", port_file.string(), "--kv-cache-mb", "16"},
        (dir_ / (name + ".log")).string()));
    const auto ports = testing::WaitForPorts(port_file, milliseconds(30000));
    ASSERT_EQ(ports.size(), 2u) << name << " did not start:\n" << w->process.log();
    w->grpc_port = ports[0];
    w->metrics_port = ports[1];
    w->stub = v1::Worker::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(w->grpc_port), grpc::InsecureChannelCredentials()));
  }

  double DecodeMetric(const std::string& name) {
    return testing::MetricValue(testing::HttpGet(decode_.metrics_port, "/metrics"), name);
  }

  // ReserveKv -> Prefill -> Generate, as the router does. Returns the whole generated sequence.
  std::vector<int> RunSplit(const std::string& id, const std::vector<int>& prompt,
                            int max_tokens) {
    v1::SamplingParams sampling;
    sampling.set_temperature(0);
    sampling.set_max_tokens(max_tokens);
    sampling.add_stop_token_ids(1);  // llama2.c ends a story with BOS
    sampling.set_ignore_eos(true);

    v1::ReserveKvRequest reserve;
    reserve.set_request_id(id);
    reserve.set_num_tokens(static_cast<std::uint32_t>(prompt.size()));
    reserve.set_lease_ms(5000);
    v1::ReserveKvResponse reserved;
    grpc::ClientContext c1;
    const grpc::Status s1 = decode_.stub->ReserveKv(&c1, reserve, &reserved);
    EXPECT_TRUE(s1.ok()) << s1.error_message();

    v1::PrefillRequest prefill;
    prefill.set_request_id(id);
    for (int t : prompt) prefill.add_prompt_token_ids(t);
    *prefill.mutable_sampling() = sampling;
    *prefill.mutable_kv_target() = reserved.target();
    v1::PrefillResponse first;
    grpc::ClientContext c2;
    const grpc::Status s2 = prefill_.stub->Prefill(&c2, prefill, &first);
    EXPECT_TRUE(s2.ok()) << s2.error_message();
    EXPECT_GT(first.kv_bytes(), 0u);

    std::vector<int> out = {first.first_token_id()};
    v1::GenerateRequest gen;
    gen.set_request_id(id);
    for (int t : prompt) gen.add_prompt_token_ids(t);
    *gen.mutable_sampling() = sampling;
    gen.set_handoff_id(first.handoff_id());
    gen.set_first_token_id(first.first_token_id());
    grpc::ClientContext c3;
    auto reader = decode_.stub->Generate(&c3, gen);
    v1::GenerateResponse msg;
    v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
    while (reader->Read(&msg)) {
      out.insert(out.end(), msg.token_ids().begin(), msg.token_ids().end());
      if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason = msg.finish_reason();
    }
    const grpc::Status s3 = reader->Finish();
    EXPECT_TRUE(s3.ok()) << s3.error_message();
    EXPECT_NE(reason, v1::FINISH_REASON_UNSPECIFIED);
    // The reference does not print the BOS that ends a story.
    if (reason == v1::FINISH_REASON_STOP && !out.empty() && out.back() == 1) out.pop_back();
    return out;
  }

  fs::path dir_;
  Worker prefill_;
  Worker decode_;
};

TEST_F(KvHandoffTest, DisaggregatedGreedyMatchesLlama2cOnEveryFixtureLine) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  std::ifstream in(kShared / "fixtures" / "stories260K_greedy.jsonl");
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto fx = nlohmann::json::parse(line);
    const auto prompt_ids = fx.at("prompt_ids").get<std::vector<int>>();
    const auto output_ids = fx.at("output_ids").get<std::vector<int>>();
    const int max_tokens = fx.at("steps").get<int>() - static_cast<int>(prompt_ids.size()) + 1;
    SCOPED_TRACE(fx.at("prompt").get<std::string>());
    EXPECT_EQ(RunSplit("fx" + std::to_string(cases), prompt_ids, max_tokens), output_ids);
    ++cases;
  }
  EXPECT_GE(cases, 10);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_handoffs_completed_total"), cases);
  EXPECT_EQ(DecodeMetric("tandem_worker_active_requests"), 0);
}

TEST_F(KvHandoffTest, DecodeReclaimsBlocksReservedForAPrefillThatDied) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  const double free_before = DecodeMetric("tandem_worker_kv_free_blocks");
  ASSERT_GT(free_before, 0);

  v1::ReserveKvRequest reserve;
  reserve.set_request_id("orphan");
  reserve.set_num_tokens(100);
  reserve.set_lease_ms(800);
  v1::ReserveKvResponse reserved;
  grpc::ClientContext ctx;
  ASSERT_TRUE(decode_.stub->ReserveKv(&ctx, reserve, &reserved).ok());
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), reserved.target().blocks_size());
  EXPECT_LT(DecodeMetric("tandem_worker_kv_free_blocks"), free_before);

  // The prefill that was to fill the reservation dies before writing anything.
  prefill_.process.Kill(SIGKILL);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (DecodeMetric("tandem_worker_kv_reserved_blocks") != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_handoffs_expired_total"), 1);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_free_blocks"), free_before);

  // A late Generate for the expired handoff fails cleanly instead of reading unwritten blocks.
  v1::GenerateRequest gen;
  gen.set_request_id("orphan");
  gen.add_prompt_token_ids(1);
  gen.set_handoff_id(reserved.target().handoff_id());
  gen.set_first_token_id(5);
  gen.mutable_sampling()->set_max_tokens(4);
  grpc::ClientContext gctx;
  auto reader = decode_.stub->Generate(&gctx, gen);
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  // A restarted prefill serves the next request end to end.
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill2");
  EXPECT_EQ(RunSplit("after-restart", {1, 403, 407, 261, 378}, 8).size(), 8u);
}

// A malformed Generate (the callback-API stream) ends at once with its own status, and the worker
// keeps nothing: no call in flight, no stream, no request in the engine.
TEST_F(KvHandoffTest, MalformedGenerateCallsEndWithTheirErrorAndLeaveNothing) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  const auto generate = [&](const v1::GenerateRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = decode_.stub->Generate(&ctx, request);
    v1::GenerateResponse message;
    int messages = 0;
    while (reader->Read(&message)) ++messages;
    EXPECT_EQ(messages, 0);
    return reader->Finish();
  };
  v1::GenerateRequest no_prompt;
  no_prompt.set_request_id("no-prompt");
  EXPECT_EQ(generate(no_prompt).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::GenerateRequest unknown_handoff;
  unknown_handoff.set_request_id("unknown-handoff");
  unknown_handoff.add_prompt_token_ids(1);
  unknown_handoff.set_handoff_id("decode/never-reserved");
  unknown_handoff.mutable_sampling()->set_max_tokens(4);
  EXPECT_NE(generate(unknown_handoff).error_code(), grpc::StatusCode::OK);
  // The call counts as in flight until gRPC's OnDone, which may run just after the client has
  // the status: wait for it, boundedly.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (DecodeMetric("tandem_worker_rpcs_in_flight") != 0 &&
         std::chrono::steady_clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(DecodeMetric("tandem_worker_rpcs_in_flight"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_active_requests"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_active_streams"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
}

TEST_F(KvHandoffTest, PrefillAgainstAMismatchedReservationFailsAndHoldsNothing) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  const auto prefill_metric = [&](const std::string& name) {
    return testing::MetricValue(testing::HttpGet(prefill_.metrics_port, "/metrics"), name);
  };
  const double prefill_free = prefill_metric("tandem_worker_kv_free_blocks");
  v1::ReserveKvRequest reserve;
  reserve.set_request_id("mismatch");
  reserve.set_num_tokens(100);  // 7 blocks, for a 5-token prompt that fills one
  v1::ReserveKvResponse reserved;
  grpc::ClientContext c1;
  ASSERT_TRUE(decode_.stub->ReserveKv(&c1, reserve, &reserved).ok());
  v1::PrefillRequest prefill;
  prefill.set_request_id("mismatch");
  for (int t : {1, 403, 407, 261, 378}) prefill.add_prompt_token_ids(t);
  prefill.mutable_sampling()->set_max_tokens(4);
  *prefill.mutable_kv_target() = reserved.target();
  v1::PrefillResponse first;
  grpc::ClientContext c2;
  const grpc::Status st = prefill_.stub->Prefill(&c2, prefill, &first);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_EQ(prefill_metric("tandem_worker_active_requests"), 0);
  EXPECT_EQ(prefill_metric("tandem_worker_kv_free_blocks"), prefill_free);
  v1::CancelRequest cancel;
  cancel.set_request_id("mismatch");
  v1::CancelResponse cancelled;
  grpc::ClientContext c3;
  ASSERT_TRUE(decode_.stub->Cancel(&c3, cancel, &cancelled).ok());
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
}

TEST_F(KvHandoffTest, AWarmUpLeavesThePromptInThePrefillCacheAndSendsNothing) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  const auto prefill_metric = [&](const std::string& name) {
    return testing::MetricValue(testing::HttpGet(prefill_.metrics_port, "/metrics"), name);
  };
  std::vector<int> prompt;
  for (int i = 0; i < 80; ++i) prompt.push_back(2 + (i * 37) % 500);
  const auto warm_up = [&](const std::string& id, v1::PrefillResponse* out) {
    v1::PrefillRequest call;
    call.set_request_id(id);
    call.set_warm_up(true);
    for (int t : prompt) call.add_prompt_token_ids(t);
    grpc::ClientContext ctx;
    return prefill_.stub->Prefill(&ctx, call, out);
  };
  v1::PrefillResponse first;
  const grpc::Status s1 = warm_up("warm-1", &first);
  ASSERT_TRUE(s1.ok()) << s1.error_message();
  EXPECT_EQ(first.cached_prompt_tokens(), 0u);
  EXPECT_EQ(first.kv_bytes(), 0u);
  EXPECT_TRUE(first.handoff_id().empty());
  // The same prompt again finds its full blocks cached: the warm-up's compute stayed.
  v1::PrefillResponse second;
  const grpc::Status s2 = warm_up("warm-2", &second);
  ASSERT_TRUE(s2.ok()) << s2.error_message();
  EXPECT_GE(second.cached_prompt_tokens(), 64u);
  EXPECT_LT(second.cached_prompt_tokens(), prompt.size());
  EXPECT_EQ(prefill_metric("tandem_worker_active_requests"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);

  // A warm-up carries prompt tokens only.
  v1::PrefillRequest bad;
  bad.set_request_id("warm-bad");
  bad.set_warm_up(true);
  for (int t : prompt) bad.add_prompt_token_ids(t);
  bad.mutable_kv_target()->add_blocks();
  v1::PrefillResponse ignored;
  grpc::ClientContext c3;
  EXPECT_EQ(prefill_.stub->Prefill(&c3, bad, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(prefill_metric("tandem_worker_active_requests"), 0);
}

TEST_F(KvHandoffTest, CancelOfAReservationFreesItAtOnce) {
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  v1::ReserveKvRequest reserve;
  reserve.set_request_id("to-cancel");
  reserve.set_num_tokens(64);
  reserve.set_lease_ms(60000);
  v1::ReserveKvResponse reserved;
  grpc::ClientContext ctx;
  ASSERT_TRUE(decode_.stub->ReserveKv(&ctx, reserve, &reserved).ok());
  EXPECT_GT(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
  v1::CancelRequest cancel;
  cancel.set_request_id("to-cancel");
  v1::CancelResponse cancelled;
  grpc::ClientContext cctx;
  ASSERT_TRUE(decode_.stub->Cancel(&cctx, cancel, &cancelled).ok());
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_reserved_blocks"), 0);
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_active_handoffs"), 0);
  // No prefill wrote these blocks, and one still might: they wait out the lease in quarantine
  // (KvReceiver::Abandon) rather than go to the next request.
  EXPECT_EQ(DecodeMetric("tandem_worker_kv_quarantined_blocks"), 4);
}

}  // namespace
}  // namespace tandem
