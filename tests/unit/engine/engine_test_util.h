#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tandem/engine/engine.h"

namespace tandem::engine::testing {

inline SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

struct Request {
  std::string id;
  std::vector<std::int32_t> prompt;
  SamplingParams params;
};

struct Completion {
  std::vector<std::int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int cached_tokens = 0;
  int prompt_tokens = 0;
};

// Adds every request up front and steps until the engine is idle.
inline absl::StatusOr<std::map<std::string, Completion>> RunAll(Engine& engine,
                                                                const std::vector<Request>& reqs) {
  for (const Request& r : reqs) {
    if (absl::Status s = engine.AddRequest(r.id, r.prompt, r.params); !s.ok()) return s;
  }
  std::map<std::string, Completion> done;
  for (int guard = 0; engine.HasPendingWork(); ++guard) {
    if (guard > 100000) return absl::InternalError("engine made no progress");
    absl::StatusOr<std::vector<StepOutput>> outs = engine.Step();
    if (!outs.ok()) return outs.status();
    for (const StepOutput& o : *outs) {
      Completion& c = done[o.request_id];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.cached_tokens = o.cached_tokens;
      c.prompt_tokens = o.prompt_tokens;
      if (o.finished) c.reason = o.finish_reason;
      if (o.finish_reason == FinishReason::kError) return absl::InternalError(o.error);
    }
  }
  return done;
}

}  // namespace tandem::engine::testing
