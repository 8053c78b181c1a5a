// `tandem-recipe parse`: generated text -> the protocol's final response or its SSE events.
//
//   tandem-recipe parse --encoding v4|v4.1 --protocol chat|responses|messages --request FILE
//       [--stream] [--id ID] [--created N] [--prompt-tokens N] [--cached-tokens N]
//       [--finish stop|length|content_filter]            < generated.txt
//   tandem-recipe parse --encoding ... --protocol ... --jsonl   < cases.jsonl
//
// Single mode pushes stdin as one text chunk. --jsonl handles one case per line (the differential
// test's batch mode): {"request": {...}, "chunks": [["text", tokens], ...], "finish": "stop",
// "prompt_tokens": N, "cached_tokens": N, "id": "...", "created": N} -> one line
// {"events": [[name|null, data], ...], "final": {...}} or {"status": N, "error": {...}}.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "commands.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/stream_processor.h"

namespace {

using tandem::recipe::ConversationRequest;
using tandem::recipe::FinishReason;
using tandem::recipe::ModelVersion;
using tandem::recipe::OutputEvent;
using tandem::recipe::Protocol;
using tandem::recipe::StreamProcessor;
using Json = nlohmann::ordered_json;

struct ParseFlags {
  ModelVersion version = ModelVersion::kDeepseekV4;
  Protocol protocol = Protocol::kChatCompletions;
  std::string request_file;
  bool stream = false;
  bool jsonl = false;
  std::string id = "resp-tandem";
  std::int64_t created = 0;
  tandem::recipe::PromptUsage usage;
  FinishReason finish = FinishReason::kStop;
};

std::optional<FinishReason> ParseFinish(absl::string_view name) {
  if (name == "stop") return FinishReason::kStop;
  if (name == "length") return FinishReason::kLength;
  if (name == "content_filter") return FinishReason::kContentFilter;
  return std::nullopt;
}

// Returns an error message, empty on success.
std::string ParseArgs(int argc, char** argv, ParseFlags& flags) {
  bool have_encoding = false;
  bool have_protocol = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    auto value = [&]() -> std::optional<absl::string_view> {
      if (i + 1 >= argc) return std::nullopt;
      return absl::string_view(argv[++i]);
    };
    auto number = [&](std::int64_t& out) {
      std::optional<absl::string_view> v = value();
      return v && absl::SimpleAtoi(*v, &out);
    };
    if (arg == "--stream") {
      flags.stream = true;
    } else if (arg == "--jsonl") {
      flags.jsonl = true;
    } else if (arg == "--encoding") {
      std::optional<absl::string_view> v = value();
      if (v == "v4") {
        flags.version = ModelVersion::kDeepseekV4;
      } else if (v == "v4.1") {
        flags.version = ModelVersion::kDeepseekV41;
      } else {
        return "--encoding takes v4 or v4.1";
      }
      have_encoding = true;
    } else if (arg == "--protocol") {
      std::optional<absl::string_view> v = value();
      if (v == "chat") {
        flags.protocol = Protocol::kChatCompletions;
      } else if (v == "responses") {
        flags.protocol = Protocol::kResponses;
      } else if (v == "messages") {
        flags.protocol = Protocol::kMessages;
      } else {
        return "--protocol takes chat, responses or messages";
      }
      have_protocol = true;
    } else if (arg == "--request") {
      std::optional<absl::string_view> v = value();
      if (!v) return "--request takes a file";
      flags.request_file = std::string(*v);
    } else if (arg == "--id") {
      std::optional<absl::string_view> v = value();
      if (!v) return "--id takes a value";
      flags.id = std::string(*v);
    } else if (arg == "--created") {
      if (!number(flags.created)) return "--created takes an integer";
    } else if (arg == "--prompt-tokens") {
      if (!number(flags.usage.prompt_tokens)) return "--prompt-tokens takes an integer";
    } else if (arg == "--cached-tokens") {
      if (!number(flags.usage.prompt_cache_hit_tokens)) return "--cached-tokens takes an integer";
    } else if (arg == "--finish") {
      std::optional<absl::string_view> v = value();
      std::optional<FinishReason> finish = v ? ParseFinish(*v) : std::nullopt;
      if (!finish) return "--finish takes stop, length or content_filter";
      flags.finish = *finish;
    } else {
      return "unknown argument " + std::string(arg);
    }
  }
  if (!have_encoding || !have_protocol) return "--encoding and --protocol are required";
  if (!flags.jsonl && flags.request_file.empty()) return "--request FILE is required";
  return "";
}

// The request converted as the protocol endpoint would, with --encoding naming the model version
// whatever model the request names.
absl::StatusOr<ConversationRequest> Convert(const Json& body, const ParseFlags& flags) {
  tandem::recipe::ConversionOptions options;
  if (body.is_object()) {
    auto model = body.find("model");
    if (model != body.end() && model->is_string()) {
      options.model_versions_by_name[model->get<std::string>()] = flags.version;
    }
  }
  switch (flags.protocol) {
    case Protocol::kChatCompletions: return tandem::recipe::ConvertChatCompletions(body, options);
    case Protocol::kResponses: return tandem::recipe::ConvertResponses(body, options);
    case Protocol::kMessages: return tandem::recipe::ConvertMessages(body, options);
  }
  return absl::InvalidArgumentError("unknown protocol");
}

struct Chunk {
  std::string text;
  int tokens = 1;
};

struct Run {
  std::vector<OutputEvent> events;
  std::string final_response;
};

Run Process(const ConversationRequest& request, const std::string& id, std::int64_t created,
            const tandem::recipe::PromptUsage& usage, const std::vector<Chunk>& chunks,
            FinishReason finish) {
  StreamProcessor processor(request, id, request.model, created);
  Run run;
  auto append = [&](std::vector<OutputEvent> events) {
    for (OutputEvent& event : events) run.events.push_back(std::move(event));
  };
  append(processor.Ready(usage));
  for (const Chunk& chunk : chunks) {
    if (processor.finished()) break;
    append(processor.Push(chunk.text, chunk.tokens));
  }
  append(processor.Finish(finish));
  run.final_response = processor.FinalResponse();
  return run;
}

void PrintError(const absl::Status& status) {
  tandem::recipe::ErrorEnvelope envelope = tandem::recipe::ToRecipeErrorEnvelope(status);
  std::fwrite(envelope.body.data(), 1, envelope.body.size(), stdout);
  std::fprintf(stderr, "%d\n", envelope.http_status);
}

int RunSingle(const ParseFlags& flags) {
  std::FILE* file = std::fopen(flags.request_file.c_str(), "rb");
  if (file == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", flags.request_file.c_str());
    return 2;
  }
  std::string text;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    PrintError(tandem::recipe::RequestError("request body is not valid JSON"));
    return 1;
  }
  absl::StatusOr<ConversationRequest> request = Convert(body, flags);
  if (!request.ok()) {
    PrintError(request.status());
    return 1;
  }
  std::string generated((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  Run run = Process(*request, flags.id, flags.created, flags.usage, {Chunk{generated, 1}},
                    flags.finish);
  if (!flags.stream) {
    std::fwrite(run.final_response.data(), 1, run.final_response.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  for (const OutputEvent& event : run.events) {
    if (!event.event.empty()) std::printf("event: %s\n", event.event.c_str());
    std::printf("data: %s\n\n", event.data.c_str());
  }
  if (std::optional<std::string> done = StreamProcessor::SseDoneData(flags.protocol)) {
    std::printf("data: %s\n\n", done->c_str());
  }
  return 0;
}

// One JSONL case; malformed cases are reported on their line, not fatal.
Json RunCase(const Json& line, const ParseFlags& flags) {
  if (!line.is_object() || !line.contains("request")) {
    return Json{{"status", 400}, {"error", "case needs a request"}};
  }
  absl::StatusOr<ConversationRequest> request = Convert(line["request"], flags);
  if (!request.ok()) {
    tandem::recipe::ErrorEnvelope envelope = tandem::recipe::ToRecipeErrorEnvelope(request.status());
    return Json{{"status", envelope.http_status},
                {"error", Json::parse(envelope.body, nullptr, false)}};
  }
  std::vector<Chunk> chunks;
  for (const Json& chunk : line.value("chunks", Json::array())) {
    if (chunk.is_string()) {
      chunks.push_back(Chunk{chunk.get<std::string>(), 1});
    } else if (chunk.is_array() && chunk.size() == 2 && chunk[0].is_string() &&
               chunk[1].is_number_integer()) {
      chunks.push_back(Chunk{chunk[0].get<std::string>(), chunk[1].get<int>()});
    }
  }
  std::optional<FinishReason> finish = ParseFinish(line.value("finish", std::string("stop")));
  tandem::recipe::PromptUsage usage{line.value("prompt_tokens", std::int64_t{0}),
                                    line.value("cached_tokens", std::int64_t{0})};
  Run run = Process(*request, line.value("id", flags.id), line.value("created", flags.created),
                    usage, chunks, finish.value_or(FinishReason::kStop));
  Json events = Json::array();
  for (const OutputEvent& event : run.events) {
    events.push_back(Json::array({event.event.empty() ? Json(nullptr) : Json(event.event),
                                  Json::parse(event.data, nullptr, false)}));
  }
  return Json{{"events", std::move(events)},
              {"final", Json::parse(run.final_response, nullptr, false)}};
}

int RunJsonl(const ParseFlags& flags) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    Json result = parsed.is_discarded() ? Json{{"status", 400}, {"error", "invalid JSON line"}}
                                        : RunCase(parsed, flags);
    std::string out = result.dump(-1, ' ', false, Json::error_handler_t::replace);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunParse(int argc, char** argv) {
  ParseFlags flags;
  std::string error = ParseArgs(argc, argv, flags);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-recipe parse: %s\n", error.c_str());
    return 2;
  }
  return flags.jsonl ? RunJsonl(flags) : RunSingle(flags);
}
