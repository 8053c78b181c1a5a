// `tandem-recipe render`: request JSON -> the DeepSeek prompt (or its token ids).
//
//   render --encoding v4|v4.1 --protocol chat|responses|messages [--ids --tokenizer FILE] [--jsonl]
//
// One request on stdin: prints the prompt exactly (no newline added), or with --ids the ids on
// one line. A rejected request prints deepseek-recipe's error body on stdout, "HTTP <status>" on
// stderr, and exits 1. --jsonl reads one request per line and writes one JSON object per line
// ({"prompt": ..., "ids": [...], "request": {converted options}}, "ids_error" instead of "ids" when
// the tokenizer lacks a control token the prompt uses, or {"status": N, "body": "..."}), so a test
// can render hundreds of requests with one process. --encoding accepts the request's model name whatever it is.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_join.h"
#include "commands.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/render.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace {

using tandem::recipe::ConversationRequest;
using tandem::recipe::ModelVersion;
using tandem::recipe::Protocol;

struct RenderOptions {
  std::optional<ModelVersion> encoding;
  Protocol protocol = Protocol::kChatCompletions;
  bool ids = false;
  bool jsonl = false;
  std::string tokenizer_path;
};

int Usage(const std::string& error) {
  std::fprintf(stderr,
               "error: %s\nusage: tandem-recipe render --encoding v4|v4.1 --protocol "
               "chat|responses|messages [--ids --tokenizer FILE] [--jsonl]\n",
               error.c_str());
  return 2;
}

std::optional<std::string> ParseArgs(int argc, char** argv, RenderOptions* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    if (arg == "--encoding") {
      const auto v = value();
      if (v == "v4") opt->encoding = ModelVersion::kDeepseekV4;
      else if (v == "v4.1") opt->encoding = ModelVersion::kDeepseekV41;
      else return "--encoding takes v4 or v4.1";
    } else if (arg == "--protocol") {
      const auto v = value();
      if (v == "chat") opt->protocol = Protocol::kChatCompletions;
      else if (v == "responses") opt->protocol = Protocol::kResponses;
      else if (v == "messages") opt->protocol = Protocol::kMessages;
      else return "--protocol takes chat, responses or messages";
    } else if (arg == "--tokenizer") {
      const auto v = value();
      if (!v.has_value()) return "--tokenizer takes a file";
      opt->tokenizer_path = *v;
    } else if (arg == "--ids") {
      opt->ids = true;
    } else if (arg == "--jsonl") {
      opt->jsonl = true;
    } else {
      return "unknown argument " + arg;
    }
  }
  if (opt->ids && opt->tokenizer_path.empty()) return "--ids needs --tokenizer FILE";
  return std::nullopt;
}

// What the converted request says beyond the prompt, in deepseek-recipe's vocabulary, so that a
// differential test can compare the inference and parsing options too.
nlohmann::ordered_json Summary(const ConversationRequest& r) {
  using tandem::recipe::ReasoningEffort;
  using tandem::recipe::ThinkingInitialStage;
  using tandem::recipe::ToolChoice;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  const auto& c = r.conversation;
  j["thinking_mode"] = c.thinking_mode;
  j["reasoning_effort"] = nullptr;
  if (c.reasoning_effort.has_value()) {
    const ReasoningEffort e = *c.reasoning_effort;
    j["reasoning_effort"] = e == ReasoningEffort::kLow    ? "low"
                            : e == ReasoningEffort::kHigh ? "high"
                            : e == ReasoningEffort::kXHigh ? "xhigh"
                                                           : "max";
  }
  j["tool_choice"] = c.tool_choice == ToolChoice::kAuto ? "auto"
                     : c.tool_choice == ToolChoice::kNone ? "none"
                                                          : "required";
  j["tools"] = c.tools.size();
  const auto& inf = r.inference;
  j["max_tokens"] = inf.max_tokens.has_value() ? nlohmann::ordered_json(*inf.max_tokens) : nullptr;
  j["temperature"] = inf.temperature.has_value() ? nlohmann::ordered_json(*inf.temperature) : nullptr;
  j["top_p"] = inf.top_p.has_value() ? nlohmann::ordered_json(*inf.top_p) : nullptr;
  j["logprobs"] = inf.logprobs;
  j["top_logprobs"] = inf.top_logprobs.has_value() ? nlohmann::ordered_json(*inf.top_logprobs) : nullptr;
  j["seed"] = inf.seed.has_value() ? nlohmann::ordered_json(*inf.seed) : nullptr;
  j["output_constraint"] = nullptr;
  if (inf.output_constraint.has_value()) {
    j["output_constraint"] = {inf.output_constraint->kind, inf.output_constraint->schema};
  }
  const auto& p = r.parsing;
  j["parse_tool_calls"] = p.parse_tool_calls;
  j["starts_in_tool_calls"] = p.starts_in_tool_calls;
  j["parse_json_output"] = p.parse_json_output;
  j["thinking_initial_stage"] = nullptr;
  if (p.thinking_initial_stage.has_value()) {
    const ThinkingInitialStage s = *p.thinking_initial_stage;
    j["thinking_initial_stage"] = s == ThinkingInitialStage::kReasoningStart ? "ReasoningStart"
                                  : s == ThinkingInitialStage::kReasoningContinuation
                                      ? "ReasoningContinuation"
                                      : "ContentContinuation";
  }
  j["stop_sequences"] = p.stop_sequences;
  j["stream"] = r.stream;
  return j;
}

struct Outcome {
  bool ok = false;
  nlohmann::ordered_json summary;
  std::string prompt;
  std::vector<std::int32_t> ids;
  std::string ids_error;  // the prompt rendered but could not be encoded
  tandem::recipe::ErrorEnvelope error;
};

absl::StatusOr<ConversationRequest> Convert(const nlohmann::ordered_json& body,
                                            const RenderOptions& opt) {
  tandem::recipe::ConversionOptions options;
  if (opt.encoding.has_value() && body.is_object() && body.contains("model") &&
      body["model"].is_string()) {
    options.model_versions_by_name[body["model"].get<std::string>()] = *opt.encoding;
  }
  switch (opt.protocol) {
    case Protocol::kChatCompletions: return tandem::recipe::ConvertChatCompletions(body, options);
    case Protocol::kResponses: return tandem::recipe::ConvertResponses(body, options);
    case Protocol::kMessages: return tandem::recipe::ConvertMessages(body, options);
  }
  return absl::InternalError("unknown protocol");
}

Outcome RenderOne(const std::string& text, const RenderOptions& opt,
                  const tandem::tokenizer::HfBpeTokenizer* tokenizer) {
  Outcome out;
  const auto body = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    out.error = tandem::recipe::ToRecipeErrorEnvelope(
        tandem::recipe::RequestError("invalid JSON request: the body is not valid JSON"));
    return out;
  }
  absl::StatusOr<ConversationRequest> request = Convert(body, opt);
  if (!request.ok()) {
    out.error = tandem::recipe::ToRecipeErrorEnvelope(request.status());
    return out;
  }
  out.summary = Summary(*request);
  tandem::recipe::RenderedPrompt rendered =
      tandem::recipe::RenderConversation(request->conversation, request->model_version);
  if (tokenizer != nullptr) {
    auto ids = tandem::recipe::EncodePrompt(rendered, *tokenizer);
    if (ids.ok()) {
      out.ids = std::move(*ids);
    } else {
      out.ids_error = std::string(ids.status().message());
    }
  }
  out.prompt = std::move(rendered.prompt);
  out.ok = true;
  return out;
}

}  // namespace

int RunRender(int argc, char** argv) {
  RenderOptions opt;
  if (auto error = ParseArgs(argc, argv, &opt)) return Usage(*error);
  std::unique_ptr<tandem::tokenizer::HfBpeTokenizer> tokenizer;
  if (!opt.tokenizer_path.empty()) {
    auto loaded = tandem::tokenizer::HfBpeTokenizer::Load(opt.tokenizer_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    tokenizer = std::move(*loaded);
  }
  if (opt.jsonl) {
    std::string line;
    while (std::getline(std::cin, line)) {
      const Outcome o = RenderOne(line, opt, opt.ids ? tokenizer.get() : nullptr);
      nlohmann::ordered_json j = nlohmann::ordered_json::object();
      if (o.ok) {
        j["prompt"] = o.prompt;
        if (opt.ids && o.ids_error.empty()) j["ids"] = o.ids;
        if (!o.ids_error.empty()) j["ids_error"] = o.ids_error;
        j["request"] = o.summary;
      } else {
        j["status"] = o.error.http_status;
        j["body"] = o.error.body;
      }
      std::cout << j.dump() << "\n";
    }
    return 0;
  }
  std::stringstream all;
  all << std::cin.rdbuf();
  const Outcome o = RenderOne(all.str(), opt, opt.ids ? tokenizer.get() : nullptr);
  if (!o.ok) {
    std::cout << o.error.body;
    std::fprintf(stderr, "HTTP %d\n", o.error.http_status);
    return 1;
  }
  if (opt.ids) {
    if (!o.ids_error.empty()) {
      std::fprintf(stderr, "error: %s\n", o.ids_error.c_str());
      return 1;
    }
    std::cout << absl::StrJoin(o.ids, " ") << "\n";
  } else {
    std::cout << o.prompt;
  }
  return 0;
}
