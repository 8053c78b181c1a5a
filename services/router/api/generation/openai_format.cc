#include "api/generation/openai_format.h"

#include <algorithm>

#include "api/http/json_text.h"

namespace tandem::router {
namespace {

using nlohmann::json;

json UsageJson(const v1::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens()},
          {"completion_tokens", usage.completion_tokens()},
          {"total_tokens", usage.prompt_tokens() + usage.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens()}}},
          // DeepSeek's names for the same split (block-aligned prefix served from any KV tier).
          {"prompt_cache_hit_tokens", usage.cached_prompt_tokens()},
          {"prompt_cache_miss_tokens",
           usage.prompt_tokens() - std::min(usage.prompt_tokens(), usage.cached_prompt_tokens())}};
}

json Ids(std::span<const std::int32_t> ids) {
  return json(std::vector<std::int32_t>(ids.begin(), ids.end()));
}

json Envelope(const ResponseContext& ctx, const char* object) {
  return {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model}};
}

json FinishJson(const std::string& finish_reason) {
  return finish_reason.empty() ? json() : json(finish_reason);
}

}  // namespace

const char* FinishReasonName(bool stopped_by_text, v1::FinishReason reason) {
  if (stopped_by_text || reason == v1::FINISH_REASON_STOP) return "stop";
  return "length";
}

std::string FormatFullResponse(const ResponseContext& ctx, const std::string& text,
                               std::span<const std::int32_t> token_ids,
                               const std::string& finish_reason, const v1::Usage& usage) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  choice["text"] = text;
  if (ctx.return_token_ids) {
    choice["token_ids"] = Ids(token_ids);
    choice["prompt_token_ids"] = Ids(ctx.prompt_ids);
  }
  json body = Envelope(ctx, "text_completion");
  body["choices"] = json::array({std::move(choice)});
  body["usage"] = UsageJson(usage);
  return DumpJson(body);
}

std::string FormatChunk(const ResponseContext& ctx, bool first, const std::string& text,
                        std::span<const std::int32_t> token_ids, const std::string& finish_reason) {
  json choice = {{"index", 0}, {"finish_reason", FinishJson(finish_reason)}, {"logprobs", nullptr}};
  choice["text"] = text;
  if (ctx.return_token_ids) {
    choice["token_ids"] = Ids(token_ids);
    if (first) choice["prompt_token_ids"] = Ids(ctx.prompt_ids);
  }
  json chunk = Envelope(ctx, "text_completion");
  chunk["choices"] = json::array({std::move(choice)});
  return DumpJson(chunk);
}

std::string FormatUsageChunk(const ResponseContext& ctx, const v1::Usage& usage) {
  json chunk = Envelope(ctx, "text_completion");
  chunk["choices"] = json::array();
  chunk["usage"] = UsageJson(usage);
  return DumpJson(chunk);
}

}  // namespace tandem::router
