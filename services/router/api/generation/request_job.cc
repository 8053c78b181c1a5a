#include "api/generation/request_job.h"

namespace tandem::router {

void SaltKvChain(JobSetup* setup, std::uint64_t kv_hash_root) {
  if (kv_hash_root == 0) return;
  setup->generation.sampling.set_kv_hash_root(kv_hash_root);
  setup->rooted_selector = std::make_unique<RootedSelector>(setup->run.selector, kv_hash_root);
  setup->run.selector = setup->rooted_selector.get();
}

RequestJob::RequestJob(JobSetup setup, std::unique_ptr<ResponseFormat> format)
    : setup_(std::move(setup)),
      format_(std::move(format)),
      latency_(setup_.metrics, setup_.arrived) {}

http::HandlerResult RequestJob::Launch(std::shared_ptr<RequestJob> job, async::TaskGroup* jobs) {
  return http::DeferredResponse{[job = std::move(job), jobs](std::shared_ptr<http::Responder> r) {
    jobs->Spawn(Run(job, std::move(r)));
  }};
}

async::Task<void> RequestJob::Run(std::shared_ptr<RequestJob> job,
                                  std::shared_ptr<http::Responder> responder) {
  JobSetup& setup = job->setup_;
  job->channel_ =
      std::make_unique<ClientChannel>(std::move(responder), setup.canceller, setup.metrics,
                                      setup.endpoint, setup.sse_write_timeout, setup.run.executor);
  job->channel_->AddHeaders(std::move(setup.response_headers));
  absl::StatusOr<GenerationOutcome> outcome = co_await RunAdmitted(
      setup.run, setup.ticket.get(), setup.generation, setup.canceller.get(), job.get());
  if (!job->decode_error_.ok()) outcome = job->decode_error_;
  if (setup.limits != nullptr) {
    const std::int64_t completion =
        outcome.ok() ? static_cast<std::int64_t>(outcome->usage.completion_tokens())
                     : job->generated_tokens_;
    setup.limits->Settle(static_cast<std::int64_t>(setup.generation.prompt_ids.size()) +
                         completion);
  }
  // The place in the admission queue is free before the tail of the answer is written.
  setup.ticket.reset();
  co_await job->Answer(std::move(outcome));
  setup.limits.reset();  // the stream is over: its concurrency slot is free
}

async::Task<void> RequestJob::Answer(absl::StatusOr<GenerationOutcome> outcome) {
  // Awaited by Run, which holds the job.
  if (!setup_.stream) {
    if (!outcome.ok()) {
      channel_->Answer(format_->ErrorResponse(outcome.status()));
    } else {
      (void)format_->Finish(*outcome);
      channel_->Answer(format_->WholeResponse());
    }
    co_return;
  }
  if (!outcome.ok() && !channel_->stream_open()) {
    // Nothing was sent yet: the failure gets its own status.
    channel_->Answer(format_->ErrorResponse(outcome.status()));
    co_return;
  }
  if (!outcome.ok()) {
    // The head went out as 200 with the first token; the error travels in the stream.
    if (!channel_->client_gone()) WriteAll(format_->ErrorEvents(outcome.status()));
  } else if (channel_->OpenStream()) {
    WriteAll(format_->Finish(*outcome));
  }
  (void)co_await channel_->Flush();
  channel_->CloseStream();
}

void RequestJob::WriteAll(std::vector<http::SseEvent> events) {
  for (http::SseEvent& event : events) channel_->Write(std::move(event));
}

bool RequestJob::OnTokens(std::span<const std::int32_t> ids) {
  latency_.Observe(ids.size());
  generated_tokens_ += static_cast<std::int64_t>(ids.size());
  std::vector<http::SseEvent> events;
  absl::StatusOr<bool> more = format_->Push(ids, &events);
  if (!more.ok()) {
    decode_error_ = more.status();
    return false;
  }
  if (setup_.stream) {
    // The stream opens with the first tokens, whatever they print.
    if (!channel_->OpenStream()) return false;
    WriteAll(std::move(events));
  }
  return *more;
}

void RequestJob::OnPromptCached(std::uint32_t cached_prompt_tokens) {
  format_->OnPromptCached(cached_prompt_tokens);
}

async::Task<bool> RequestJob::Flush() {
  if (!setup_.stream) co_return true;
  co_return co_await channel_->Flush();
}

}  // namespace tandem::router
