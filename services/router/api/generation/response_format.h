#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dispatch/dispatcher.h"
#include "tandem/http/message.h"
#include "tandem/http/sse_writer.h"

namespace tandem::router {

// How one protocol turns a generation's tokens into its answer: stream events as tokens come,
// or one whole response at the end. RequestJob drives it; everything else about serving a
// generation (admission, workers, the client's connection) is the same for every protocol.
class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;

  // How many prompt tokens the KV cache served (before the first tokens).
  virtual void OnPromptCached(std::uint32_t /*cached_prompt_tokens*/) {}
  // New tokens: appends what they add to the stream to `events` (used only when streaming).
  // False once the output has ended (a stop sequence or id): the workers are told to stop. An
  // error for a token the tokenizer cannot decode.
  virtual absl::StatusOr<bool> Push(std::span<const std::int32_t> ids,
                                    std::vector<http::SseEvent>* events) = 0;
  // The generation ended well: the stream's last events, through its end marker.
  virtual std::vector<http::SseEvent> Finish(const GenerationOutcome& outcome) = 0;
  // Not streaming: the whole answer, after Finish.
  virtual http::Response WholeResponse() = 0;
  // A failure before anything was sent, with its own HTTP status.
  virtual http::Response ErrorResponse(const absl::Status& status) const = 0;
  // A failure after the stream started: its last events.
  virtual std::vector<http::SseEvent> ErrorEvents(const absl::Status& status) const = 0;
};

}  // namespace tandem::router
