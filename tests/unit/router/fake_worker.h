#pragma once

// Test doubles for the router: a byte-level tokenizer and a real in-process gRPC Worker server
// with scripted behaviour that registers through the router's real RouterControl service.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tandem/rpc/conversions.h"
#include "tandem/tokenizer/tokenizer.h"
#include "tandem/v1/router_control.grpc.pb.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::router::testing {

// One token per byte (id = byte + 3), BOS 1, EOS 2: tests can name the text a token list decodes
// to, and multi-byte UTF-8 characters arrive split over several tokens.
class ByteTokenizer final : public tokenizer::Tokenizer {
 public:
  absl::StatusOr<std::vector<std::int32_t>> Encode(absl::string_view text,
                                                   bool add_bos) const override {
    std::vector<std::int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(c + 3);
    return ids;
  }
  absl::StatusOr<std::string> DecodeToken(std::int32_t, std::int32_t token) const override {
    if (token < 0 || token >= vocab_size()) return absl::OutOfRangeError("token out of range");
    if (token < 3) return std::string();
    return std::string(1, static_cast<char>(token - 3));
  }
  int vocab_size() const override { return 259; }
  std::int32_t bos_id() const override { return 1; }
  std::int32_t eos_id() const override { return 2; }
};

inline std::vector<std::int32_t> Ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  for (unsigned char c : text) ids.push_back(c + 3);
  return ids;
}

// What a FakeWorker does when called.
struct WorkerScript {
  // Generate streams these (on decode: the tokens after the first), cut at max_tokens and after a
  // stop token id, like the engine.
  std::vector<std::int32_t> tokens;
  std::int32_t first_token = 0;  // what Prefill returns
  std::uint32_t cached_prompt_tokens = 0;
  std::uint64_t kv_bytes = 4096;
  grpc::StatusCode reserve_status = grpc::StatusCode::OK;
  grpc::StatusCode prefill_status = grpc::StatusCode::OK;
  grpc::StatusCode generate_status = grpc::StatusCode::OK;  // returned before any token
  // After this many tokens, Generate stops sending and waits until the call is cancelled.
  int hang_after = -1;
  std::chrono::milliseconds token_delay{0};
  std::chrono::milliseconds prefill_delay{0};  // how long each Prefill takes
  std::chrono::microseconds prefill_delay_per_token{0};  // ... plus this per prompt token
  // Prefill reports as cached the longest earlier prompt (Prefill or warm-up) that starts this
  // one, as a prefix cache would, instead of cached_prompt_tokens.
  bool prefix_cache = false;
  int refuse_first_generates = 0;  // the first N Generate calls answer RESOURCE_EXHAUSTED
  // The first N Generate calls answer DEADLINE_EXCEEDED at once: the worker's own time bound (a
  // KV handoff that never arrived within its lease), long before the request's deadline.
  int expire_first_generates = 0;
  // Refuses new work (ReserveKv, Prefill, Generate without a handoff) as a worker that began
  // draining does before its heartbeat reaches the router: UNAVAILABLE with kDrainingTrailer.
  bool refuse_as_draining = false;
  std::uint32_t max_batch_tokens = 0;  // announced step budget (0: unknown)
  // The first N Cancel calls are recorded and answered UNAVAILABLE, as a call that did not get
  // through.
  int unavailable_first_cancels = 0;
  // The first N Prefill / Generate calls that carry an image without rows (no encoder named)
  // answer FAILED_PRECONDITION with kImageRowsNeededTrailer, as a worker must when its cache
  // does not hold that image's KV; such a Generate first streams rows_needed_after tokens (a
  // decode that lost the image's KV mid-stream).
  int rows_needed_prefills = 0;
  int rows_needed_generates = 0;
  int rows_needed_after = 0;
};

// Whether a call names an image whose rows it does not bring.
template <typename Call>
bool HasImageWithoutRows(const Call& call) {
  return std::any_of(call.images().begin(), call.images().end(),
                     [](const v1::PromptImage& image) { return image.lease_id().empty(); });
}

inline grpc::Status AskForImageRows(grpc::ServerContext* context) {
  context->AddTrailingMetadata(rpc::kImageRowsNeededTrailer, "1");
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "an image's rows are needed (scripted)");
}

class FakeWorker final : public v1::Worker::Service {
 public:
  FakeWorker(std::string id, v1::WorkerRole role, WorkerScript script, std::uint32_t max_context = 4096)
      : id_(std::move(id)), role_(role), script_(std::move(script)), max_context_(max_context) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeWorker() override { Kill(); }

  // Stops serving at once: open calls are cancelled and the port closes, as when a process dies.
  void Kill() {
    {
      absl::MutexLock lock(&mu_);
      killed_ = true;
    }
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }

  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& id() const { return id_; }

  v1::WorkerInfo Info(std::uint64_t incarnation = 7, std::uint32_t block_size = 16) const {
    v1::WorkerInfo info;
    info.set_worker_id(id_);
    info.set_role(role_);
    info.set_model("fake-model");
    info.set_grpc_endpoint(endpoint());
    info.set_kv_block_size(block_size);
    info.set_kv_hash_scheme("chained-fnv1a-splitmix64/v1");
    info.set_max_context(max_context_);
    info.set_incarnation(incarnation);
    info.set_max_batch_tokens(script_.max_batch_tokens);
    return info;
  }

  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // Waits until a call starting with `prefix` was recorded.
  bool WaitForCall(const std::string& prefix, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (const std::string& c : calls()) {
        if (c.rfind(prefix, 0) == 0) return true;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // Waits until a Generate for `request_id` ended because its caller cancelled it (the router
  // stops a worker whose output it no longer needs).
  bool WaitForCancelledGenerate(const std::string& request_id,
                                std::chrono::milliseconds timeout) const {
    absl::MutexLock lock(&mu_);
    const auto seen = [&] {
      mu_.AssertHeld();
      return std::find(cancelled_generates_.begin(), cancelled_generates_.end(), request_id) !=
             cancelled_generates_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), absl::FromChrono(timeout));
  }
  v1::GenerateRequest last_generate() const {
    absl::MutexLock lock(&mu_);
    return last_generate_;
  }
  // The most Prefill calls this worker served at the same time.
  int max_concurrent_prefills() const {
    absl::MutexLock lock(&mu_);
    return max_concurrent_prefills_;
  }
  // Each Prefill served, in arrival order: its request id, prompt length and whether it was a
  // warm-up (a prefix computed alone).
  struct PrefillSeen {
    std::string request_id;
    int prompt_tokens = 0;
    bool warm_up = false;
  };
  std::vector<PrefillSeen> prefills() const {
    absl::MutexLock lock(&mu_);
    return prefills_;
  }
  v1::PrefillRequest last_prefill() const {
    absl::MutexLock lock(&mu_);
    return last_prefill_;
  }

  static grpc::Status RefuseAsDraining(grpc::ServerContext* context) {
    context->AddTrailingMetadata(rpc::kDrainingTrailer, "1");
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker is draining");
  }

  grpc::Status ReserveKv(grpc::ServerContext* context, const v1::ReserveKvRequest* request,
                         v1::ReserveKvResponse* response) override {
    Record(absl::StrCat("ReserveKv ", request->request_id(), " ", request->num_tokens()));
    if (script_.refuse_as_draining) return RefuseAsDraining(context);
    if (script_.reserve_status != grpc::StatusCode::OK) return grpc::Status(script_.reserve_status, "reserve scripted");
    v1::KvTarget* target = response->mutable_target();
    target->set_decode_worker_id(id_);
    target->set_ucx_address("opaque-address");
    target->set_handoff_id(absl::StrCat("handoff-", request->request_id()));
    target->add_blocks()->set_remote_addr(0x1000);
    return grpc::Status::OK;
  }

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override {
    if (script_.refuse_as_draining) {
      Record(absl::StrCat("Prefill ", request->request_id(), " refused"));
      return RefuseAsDraining(context);
    }
    {
      absl::MutexLock lock(&mu_);
      last_prefill_ = *request;
      prefills_.push_back({.request_id = request->request_id(),
                           .prompt_tokens = request->prompt_token_ids_size(),
                           .warm_up = request->warm_up()});
    }
    Record(absl::StrCat("Prefill ", request->request_id(), " ", request->kv_target().handoff_id()));
    {
      absl::MutexLock lock(&mu_);
      max_concurrent_prefills_ = std::max(max_concurrent_prefills_, ++concurrent_prefills_);
    }
    if (script_.prefill_delay.count() > 0) std::this_thread::sleep_for(script_.prefill_delay);
    if (script_.prefill_delay_per_token.count() > 0) {
      std::this_thread::sleep_for(script_.prefill_delay_per_token *
                                  request->prompt_token_ids_size());
    }
    {
      absl::MutexLock lock(&mu_);
      --concurrent_prefills_;
    }
    if (script_.prefill_status != grpc::StatusCode::OK) return grpc::Status(script_.prefill_status, "prefill scripted");
    if (HasImageWithoutRows(*request) && TakeOne(&rows_needed_prefills_, script_.rows_needed_prefills)) {
      return AskForImageRows(context);
    }
    response->set_first_token_id(script_.first_token);
    response->set_cached_prompt_tokens(script_.prefix_cache ? CachedPrefix(*request)
                                                            : script_.cached_prompt_tokens);
    response->set_handoff_id(request->kv_target().handoff_id());
    response->set_kv_bytes(script_.kv_bytes);
    response->set_kv_transfer_us(250);
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    {
      absl::MutexLock lock(&mu_);
      last_generate_ = *request;
    }
    Record(absl::StrCat("Generate ", request->request_id(), " ", request->handoff_id(), " ",
                        request->first_token_id()));
    if (script_.refuse_as_draining && request->handoff_id().empty()) {
      return RefuseAsDraining(context);
    }
    if (script_.generate_status != grpc::StatusCode::OK) {
      return grpc::Status(script_.generate_status, "generate scripted");
    }
    {
      absl::MutexLock lock(&mu_);
      if (generates_refused_ < script_.refuse_first_generates) {
        ++generates_refused_;
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "engine queue is full (scripted)");
      }
      if (generates_expired_ < script_.expire_first_generates) {
        ++generates_expired_;
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "the KV handoff did not arrive within its lease (scripted)");
      }
    }
    const bool ask_for_rows =
        HasImageWithoutRows(*request) && TakeOne(&rows_needed_generates_, script_.rows_needed_generates);
    const bool has_first = request->first_token_id() >= 0;
    const auto& stops = request->sampling().stop_token_ids();
    const auto is_stop = [&](std::int32_t t) { return std::find(stops.begin(), stops.end(), t) != stops.end(); };
    int produced = has_first ? 1 : 0;
    v1::FinishReason finish = v1::FINISH_REASON_LENGTH;
    bool done = produced >= request->sampling().max_tokens() ||
                (has_first && is_stop(request->first_token_id()));
    if (has_first && is_stop(request->first_token_id())) finish = v1::FINISH_REASON_STOP;
    size_t sent = 0;
    while (!done && sent < script_.tokens.size()) {
      if (ask_for_rows && static_cast<int>(sent) == script_.rows_needed_after) {
        return AskForImageRows(context);
      }
      if (script_.hang_after >= 0 && static_cast<int>(sent) == script_.hang_after) {
        while (!context->IsCancelled() && !Killed()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while hanging");
      }
      if (script_.token_delay.count() > 0) std::this_thread::sleep_for(script_.token_delay);
      const std::int32_t t = script_.tokens[sent++];
      v1::GenerateResponse msg;
      // As real workers do: the first tokens of a prompt this worker computed say what was cached.
      if (sent == 1 && !has_first) msg.mutable_usage()->set_cached_prompt_tokens(script_.cached_prompt_tokens);
      msg.add_token_ids(t);
      ++produced;
      if (is_stop(t)) {
        finish = v1::FINISH_REASON_STOP;
        done = true;
      } else if (produced >= request->sampling().max_tokens()) {
        done = true;
      }
      if (context->IsCancelled() || !writer->Write(msg)) {
        absl::MutexLock lock(&mu_);
        cancelled_generates_.push_back(request->request_id());
        return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
      }
    }
    if (!done) finish = v1::FINISH_REASON_STOP;  // ran out of script: as if EOS
    v1::GenerateResponse last;
    last.set_finish_reason(finish);
    last.mutable_usage()->set_prompt_tokens(request->prompt_token_ids_size());
    last.mutable_usage()->set_completion_tokens(produced);
    last.mutable_usage()->set_cached_prompt_tokens(has_first ? 0 : script_.cached_prompt_tokens);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override {
    Record(absl::StrCat("Cancel ", request->request_id()));
    if (cancels_.fetch_add(1) < script_.unavailable_first_cancels) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the cancel did not get through (scripted)");
    }
    response->set_found(true);
    return grpc::Status::OK;
  }

 private:
  void Record(std::string call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }
  // The longest earlier prompt that is a prefix of this one (this one remembered after).
  std::uint32_t CachedPrefix(const v1::PrefillRequest& request) {
    const std::vector<std::int32_t> prompt(request.prompt_token_ids().begin(),
                                           request.prompt_token_ids().end());
    absl::MutexLock lock(&mu_);
    std::size_t longest = 0;
    for (const std::vector<std::int32_t>& seen : cached_prompts_) {
      if (seen.size() <= prompt.size() && seen.size() > longest &&
          std::equal(seen.begin(), seen.end(), prompt.begin())) {
        longest = seen.size();
      }
    }
    cached_prompts_.push_back(prompt);
    return static_cast<std::uint32_t>(longest);
  }
  bool Killed() {
    absl::MutexLock lock(&mu_);
    return killed_;
  }
  // True for the first `limit` calls that reach it.
  bool TakeOne(int* taken, int limit) {
    absl::MutexLock lock(&mu_);
    if (*taken >= limit) return false;
    ++*taken;
    return true;
  }

  const std::string id_;
  const v1::WorkerRole role_;
  const WorkerScript script_;
  const std::uint32_t max_context_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  int concurrent_prefills_ ABSL_GUARDED_BY(mu_) = 0;
  int generates_refused_ ABSL_GUARDED_BY(mu_) = 0;
  int generates_expired_ ABSL_GUARDED_BY(mu_) = 0;
  int rows_needed_prefills_ ABSL_GUARDED_BY(mu_) = 0;
  int rows_needed_generates_ ABSL_GUARDED_BY(mu_) = 0;
  int max_concurrent_prefills_ ABSL_GUARDED_BY(mu_) = 0;
  v1::GenerateRequest last_generate_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> cancelled_generates_ ABSL_GUARDED_BY(mu_);
  v1::PrefillRequest last_prefill_ ABSL_GUARDED_BY(mu_);
  std::vector<PrefillSeen> prefills_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::int32_t>> cached_prompts_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> cancels_{0};
};

// The worker side of RouterControl, driven by the test (no background heartbeats).
class ControlClient {
 public:
  explicit ControlClient(int control_port)
      : stub_(v1::RouterControl::NewStub(grpc::CreateChannel(
            absl::StrCat("127.0.0.1:", control_port), grpc::InsecureChannelCredentials()))) {}

  grpc::Status Register(const v1::WorkerInfo& info, v1::RegisterWorkerResponse* response = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RegisterWorkerRequest request;
    request.mutable_version()->set_major(1);
    *request.mutable_worker() = info;
    v1::RegisterWorkerResponse ignored;
    return stub_->RegisterWorker(&ctx, request, response ? response : &ignored);
  }

  // Returns reregister. `draining`: WorkerLoad.draining, as a worker sends once its drain began.
  bool Heartbeat(const v1::WorkerInfo& info, std::uint32_t running = 0, std::uint32_t waiting = 0,
                 bool draining = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::HeartbeatRequest request;
    request.set_worker_id(info.worker_id());
    request.set_incarnation(info.incarnation());
    request.mutable_load()->set_running_requests(running);
    request.mutable_load()->set_waiting_requests(waiting);
    request.mutable_load()->set_draining(draining);
    v1::HeartbeatResponse response;
    grpc::Status st = stub_->Heartbeat(&ctx, request, &response);
    return !st.ok() || response.reregister();
  }

  // What a worker sends when its drain is over.
  grpc::Status Deregister(const v1::WorkerInfo& info, const std::string& reason = "drained") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::DeregisterWorkerRequest request;
    request.set_worker_id(info.worker_id());
    request.set_incarnation(info.incarnation());
    request.set_reason(reason);
    v1::DeregisterWorkerResponse response;
    return stub_->DeregisterWorker(&ctx, request, &response);
  }

 private:
  std::unique_ptr<v1::RouterControl::Stub> stub_;
};

}  // namespace tandem::router::testing
