#include "worker_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "tandem/rpc/conversions.h"
#include "update_queue.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::system_clock;

std::int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

// Keeps a gauge honest on every exit path of a handler.
class ScopedCount {
 public:
  explicit ScopedCount(std::atomic<int>* c) : c_(c) { c_->fetch_add(1); }
  ~ScopedCount() { c_->fetch_sub(1); }

 private:
  std::atomic<int>* c_;
};

absl::Status ValidateCommon(const v1::ApiVersion& version, const std::string& request_id,
                            int prompt_len) {
  absl::Status st = rpc::CheckVersion(version);
  if (!st.ok()) return st;
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is required");
  if (prompt_len == 0) return absl::InvalidArgumentError("prompt_token_ids is empty");
  return absl::OkStatus();
}

}  // namespace

grpc::Status WorkerService::ImagesFailed(grpc::ServerContextBase* context,
                                         const absl::Status& status) {
  if (ImageRowsLost(status)) context->AddTrailingMetadata(rpc::kImageRowsNeededTrailer, "1");
  return rpc::ToGrpc(status);
}

bool WorkerService::RefuseIfDraining(grpc::ServerContextBase* context, grpc::Status* refusal) {
  if (!draining_.load()) return false;
  drain_refusals_.fetch_add(1);
  context->AddTrailingMetadata(rpc::kDrainingTrailer, "1");
  *refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "worker is draining: new work goes to another worker");
  return true;
}

void WorkerService::CountIfDraining() {
  if (draining_.load()) requests_while_draining_.fetch_add(1);
}

absl::StatusOr<kv::TrafficClass> WorkerService::TrafficClassOf(const std::string& name) const {
  if (name.empty()) return default_class_;
  auto cls = kv::ParseTrafficClass(name);
  if (!cls.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("traffic_class: ", cls.status().message()));
  }
  return *cls;
}

namespace {

// Encoders present worker certificates, not the router's name the worker's own TLS expects.
security::TlsConfig EncoderTls(const WorkerConfig& config) {
  security::TlsConfig tls = config.tls;
  tls.server_name = config.encoder_tls_server_name;
  return tls;
}

std::chrono::system_clock::time_point DeadlineOf(std::uint64_t deadline_unix_ms) {
  // Without a deadline, bounded anyway: an encoder that stops answering must not hold the call.
  if (deadline_unix_ms == 0) return std::chrono::system_clock::now() + std::chrono::seconds(60);
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(deadline_unix_ms));
}

// What a one-shot engine request (a prefill, a warm-up) ended with.
struct Finished {
  serving::RequestUpdate last;  // the last non-empty tokens and the finishing update's fields
  bool cancel_sent = false;     // the caller went away or the deadline passed first
};

// Waits for request `id`'s end, cancelling it in the engine once the call is cancelled or its
// deadline (unix ms, 0: none) has passed.
Finished AwaitFinished(UpdateQueue& queue, serving::EngineLoop& loop, const std::string& id,
                       grpc::ServerContext* context, std::int64_t deadline_ms) {
  Finished out;
  while (!out.last.finished) {
    for (serving::RequestUpdate& u : queue.PopAll(std::chrono::milliseconds(20))) {
      if (!u.new_tokens.empty()) out.last.new_tokens = u.new_tokens;
      if (u.finished) {
        out.last.finished = true;
        out.last.finish_reason = u.finish_reason;
        out.last.error = u.error;
        out.last.image_rows_missing = u.image_rows_missing;
        out.last.cached_tokens = u.cached_tokens;
      }
    }
    if (!out.cancel_sent &&
        (context->IsCancelled() || (deadline_ms > 0 && NowUnixMs() > deadline_ms))) {
      loop.Cancel(id);
      out.cancel_sent = true;
    }
  }
  return out;
}

}  // namespace

WorkerService::WorkerService(const WorkerConfig& config, serving::EngineLoop* loop,
                             KvReceiver* receiver, KvSender* sender)
    : config_(config),
      default_class_(
          kv::ParseTrafficClass(config.kv_tiers.default_traffic_class).value_or(kv::TrafficClass::kChat)),
      loop_(loop),
      receiver_(receiver),
      sender_(sender),
      images_(loop->model_config().hidden_size, EncoderTls(config)) {}

v1::WorkerLoad WorkerService::CurrentLoad() const {
  const serving::LoopLoad l = loop_->load();
  v1::WorkerLoad out;
  out.set_running_requests(l.running);
  out.set_waiting_requests(l.waiting);
  out.set_free_kv_blocks(l.free_blocks);
  out.set_total_kv_blocks(l.total_blocks);
  out.set_draining(draining_.load());
  return out;
}

grpc::Status WorkerService::ReserveKv(grpc::ServerContext* context,
                                      const v1::ReserveKvRequest* request,
                                      v1::ReserveKvResponse* response) {
  ScopedCount rpc(&rpcs_in_flight_);
  if (grpc::Status refusal; RefuseIfDraining(context, &refusal)) return refusal;
  CountIfDraining();
  if (receiver_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this worker does not receive KV (not a decode worker)");
  }
  if (absl::Status st = rpc::CheckVersion(request->version()); !st.ok()) return rpc::ToGrpc(st);
  const int context_limit = loop_->model_config().max_position_embeddings;
  if (context_limit > 0 && static_cast<int>(request->num_tokens()) > context_limit) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat(request->num_tokens(), " tokens exceed the context of ",
                                     context_limit));
  }
  const auto lease = std::chrono::milliseconds(
      request->lease_ms() > 0 ? request->lease_ms() : config_.handoff_lease_ms);
  auto target = receiver_->Reserve(request->request_id(), static_cast<int>(request->num_tokens()),
                                   lease);
  if (!target.ok()) return rpc::ToGrpc(target.status());
  *response->mutable_target() = std::move(*target);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Prefill(grpc::ServerContext* context,
                                    const v1::PrefillRequest* request,
                                    v1::PrefillResponse* response) {
  ScopedCount rpc(&rpcs_in_flight_);
  if (grpc::Status refusal; RefuseIfDraining(context, &refusal)) return refusal;
  CountIfDraining();
  if (sender_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this worker does not send KV (not a prefill worker)");
  }
  absl::Status valid = ValidateCommon(request->version(), request->request_id(),
                                      request->prompt_token_ids_size());
  if (!valid.ok()) return rpc::ToGrpc(valid);
  if (request->warm_up()) return WarmUp(context, request, response);
  if (request->kv_target().blocks_size() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "kv_target has no blocks");
  }
  auto cls = TrafficClassOf(request->traffic_class());
  if (!cls.ok()) return rpc::ToGrpc(cls.status());
  const std::string& id = request->request_id();
  std::vector<std::int32_t> prompt(request->prompt_token_ids().begin(),
                                   request->prompt_token_ids().end());
  // Prefill samples exactly the first token, with the request's own parameters (same seed and
  // draw index as a single-process run), and keeps the prompt's KV for the transfer.
  engine::SamplingParams params = rpc::FromProto(request->sampling());
  const int resumed = static_cast<int>(request->resumed_tokens());
  params.max_tokens = resumed + 1;
  auto images = images_.Resolve(request->images(), /*fetch_rows=*/true,
                                DeadlineOf(request->deadline_unix_ms()));
  if (!images.ok()) return ImagesFailed(context, images.status());
  auto queue = std::make_shared<UpdateQueue>();
  absl::Status submitted = loop_->SubmitWith(
      id, [queue](const serving::RequestUpdate& u) { queue->Push(u); },
      [&](engine::Engine& e) {
        return e.AddRequest(id, prompt, params,
                            engine::Engine::RequestOptions{.hold_kv = true,
                                                           .traffic_class = *cls,
                                                           .resumed_tokens = resumed,
                                                           .images = std::move(*images)});
      });
  if (!submitted.ok()) return rpc::ToGrpc(submitted);

  const auto [last, cancel_sent] =
      AwaitFinished(*queue, *loop_, id, context, request->deadline_unix_ms());
  const auto release_held = [&] {
    loop_->RunOnLoop([&](engine::Engine& e) {
           e.ReleaseHeldKv(id).IgnoreError();  // absent when the request did not complete
           return absl::OkStatus();
         })
        .IgnoreError();
  };
  if (last.finish_reason == engine::FinishReason::kCancelled || cancel_sent) {
    release_held();
    cancelled_total_.fetch_add(1);
    return grpc::Status(grpc::StatusCode::CANCELLED, "prefill cancelled");
  }
  if (last.image_rows_missing) {
    // The router skipped encoding an image it expected this cache to hold, and it does not.
    context->AddTrailingMetadata(rpc::kImageRowsNeededTrailer, "1");
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, last.error);
  }
  if (last.finish_reason == engine::FinishReason::kError || last.new_tokens.empty()) {
    release_held();
    return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("prefill failed: ", last.error));
  }
  std::vector<std::int32_t> blocks;
  absl::Status held = loop_->RunOnLoop([&](engine::Engine& e) -> absl::Status {
    auto b = e.HeldKvBlocks(id);
    if (!b.ok()) return b.status();
    blocks = std::move(*b);
    return absl::OkStatus();
  });
  if (!held.ok()) {
    release_held();
    return rpc::ToGrpc(held);
  }
  const auto transfer_deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(std::max<int>(request->kv_target().lease_ms(), 1000));
  // The blocks are read by the transfer, so they are released only after it ended.
  auto sent = sender_->Send(request->kv_target(), blocks, transfer_deadline);
  release_held();
  if (!sent.ok()) return rpc::ToGrpc(sent.status());
  kv_sent_bytes_total_.fetch_add(sent->bytes);
  response->set_first_token_id(last.new_tokens.front());
  response->set_cached_prompt_tokens(last.cached_tokens);
  response->set_handoff_id(request->kv_target().handoff_id());
  response->set_kv_bytes(sent->bytes);
  response->set_kv_transfer_us(static_cast<std::uint32_t>(sent->elapsed.count()));
  return grpc::Status::OK;
}

grpc::Status WorkerService::WarmUp(grpc::ServerContext* context, const v1::PrefillRequest* request,
                                   v1::PrefillResponse* response) {
  if (request->kv_target().blocks_size() > 0 || request->images_size() > 0 ||
      request->resumed_tokens() > 0) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "a warm-up takes prompt tokens only (no kv_target, images or resumed tokens)");
  }
  auto cls = TrafficClassOf(request->traffic_class());
  if (!cls.ok()) return rpc::ToGrpc(cls.status());
  const std::string& id = request->request_id();
  std::vector<std::int32_t> prompt(request->prompt_token_ids().begin(),
                                   request->prompt_token_ids().end());
  // The engine computes a prompt on the way to its first token; greedy, one token. The prompt's
  // blocks stay in the prefix cache afterwards like any finished request's, under the request's
  // cache salt (a salted prefix is warmed in its own namespace, never into a shared one).
  engine::SamplingParams params;
  params.temperature = 0;
  params.max_tokens = 1;
  params.kv_hash_root = request->sampling().kv_hash_root();
  auto queue = std::make_shared<UpdateQueue>();
  absl::Status submitted = loop_->SubmitWith(
      id, [queue](const serving::RequestUpdate& u) { queue->Push(u); },
      [&](engine::Engine& e) {
        return e.AddRequest(
            id, prompt, params,
            engine::Engine::RequestOptions{
                .hold_kv = false, .traffic_class = *cls, .resumed_tokens = 0, .images = {}});
      });
  if (!submitted.ok()) return rpc::ToGrpc(submitted);
  const auto [last, cancel_sent] =
      AwaitFinished(*queue, *loop_, id, context, request->deadline_unix_ms());
  if (last.finish_reason == engine::FinishReason::kCancelled || cancel_sent) {
    cancelled_total_.fetch_add(1);
    return grpc::Status(grpc::StatusCode::CANCELLED, "warm-up cancelled");
  }
  if (last.finish_reason == engine::FinishReason::kError) {
    return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("warm-up failed: ", last.error));
  }
  response->set_first_token_id(-1);
  response->set_cached_prompt_tokens(last.cached_tokens);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  // A handed-off request's first token was counted by prefill, not by this engine.
  const int first_token_credit = request->handoff_id().empty() ? 0 : 1;
  const auto deadline_unix_ms = static_cast<std::int64_t>(request->deadline_unix_ms());
  std::shared_ptr<GenerateStream> stream = GenerateStream::Create(
      loop_, &outbox_,
      GenerateStream::Options{.request_id = request->request_id(),
                              .deadline_unix_ms = deadline_unix_ms,
                              .first_token_credit = first_token_credit,
                              .context = context},
      GenerateStream::Counters{.rpcs_in_flight = &rpcs_in_flight_,
                               .active_streams = &active_streams_,
                               .cancelled_total = &cancelled_total_});
  // Completing a handoff reserved before the drain is finishing held work, never refused.
  if (grpc::Status refusal;
      request->handoff_id().empty() && RefuseIfDraining(context, &refusal)) {
    stream->Start(refusal);
  } else {
    const absl::Status submitted = SubmitGenerate(*request, stream->Sink());
    stream->Start(ImageRowsLost(submitted) ? ImagesFailed(context, submitted)
                                           : rpc::ToGrpc(submitted));
  }
  return stream.get();  // owns itself until OnDone
}

absl::Status WorkerService::SubmitGenerate(const v1::GenerateRequest& request,
                                           serving::UpdateSink sink) {
  if (request.handoff_id().empty()) CountIfDraining();
  absl::Status valid = ValidateCommon(request.version(), request.request_id(),
                                      request.prompt_token_ids_size());
  if (!valid.ok()) return valid;
  auto cls = TrafficClassOf(request.traffic_class());
  if (!cls.ok()) return cls.status();
  std::vector<std::int32_t> prompt(request.prompt_token_ids().begin(),
                                   request.prompt_token_ids().end());
  // Computing the prompt here needs the image rows; completing a handoff only their spans.
  auto images = images_.Resolve(request.images(), /*fetch_rows=*/request.handoff_id().empty(),
                                DeadlineOf(request.deadline_unix_ms()));
  if (!images.ok()) return images.status();
  if (request.handoff_id().empty()) {
    const engine::SamplingParams params = rpc::FromProto(request.sampling());
    const std::string& id = request.request_id();
    const int resumed = static_cast<int>(request.resumed_tokens());
    return loop_->SubmitWith(id, std::move(sink), [&](engine::Engine& e) {
      return e.AddRequest(id, prompt, params,
                          engine::Engine::RequestOptions{.traffic_class = *cls,
                                                         .resumed_tokens = resumed,
                                                         .images = std::move(*images)});
    });
  }
  if (receiver_ == nullptr) {
    return absl::FailedPreconditionError("this worker does not receive KV handoffs");
  }
  return receiver_->Commit(request.handoff_id(), request.request_id(), std::move(prompt),
                           request.first_token_id(), rpc::FromProto(request.sampling()), *cls,
                           std::move(sink), static_cast<int>(request.resumed_tokens()),
                           std::move(*images));
}

grpc::Status WorkerService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) {
  if (request->request_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id is required");
  }
  loop_->Cancel(request->request_id());
  // A reservation that never reached Generate (prefill failed) goes back to the pool now.
  if (receiver_ != nullptr) receiver_->Abandon(request->request_id());
  response->set_found(true);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                   v1::HealthResponse* response) {
  response->set_serving(true);
  *response->mutable_load() = CurrentLoad();
  return grpc::Status::OK;
}

}  // namespace tandem::worker
