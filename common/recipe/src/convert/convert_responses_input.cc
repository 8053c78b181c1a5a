// Responses input items -> conversation messages.
//
// Reasoning, assistant text and function calls that follow each other form one assistant turn;
// the function_call_output items right after it answer its calls. Every call must be answered
// before anything else follows, outputs are put in call order, and a call id is used once.

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convert/convert_responses_internal.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe::internal {
namespace {

constexpr char kUnsupportedDocument[] = "[Unsupported Document]";

absl::Status CheckPartShape(const Json& part, bool tool_output) {
  if (!part.is_object()) {
    return InvalidType(part, tool_output ? "internally tagged enum ResponsesToolCallOutputItem"
                                         : "internally tagged enum ResponsesContentBlock");
  }
  absl::StatusOr<std::string> tag =
      tool_output ? RequireTag(part, {"input_text", "input_image", "input_file"})
                  : RequireTag(part, {"input_text", "output_text", "input_image", "input_file"});
  TANDEM_ASSIGN_OR_RETURN(std::string type, std::move(tag));
  if (type == "input_text" || type == "output_text") return RequireString(part, "text").status();
  if (type == "input_image") {
    TANDEM_RETURN_IF_ERROR(ReadString(part, "image_url").status());
    TANDEM_RETURN_IF_ERROR(ReadString(part, "file_id").status());
    TANDEM_RETURN_IF_ERROR(
        ReadVariant(part, "detail", {"low", "high", "original", "auto"}).status());
  }
  return absl::OkStatus();
}

ImageDetail DetailOf(const Json& part) {
  const std::string detail = part.value("detail", Json("high")).is_string()
                                 ? part.value("detail", std::string("high"))
                                 : std::string("high");
  if (detail == "low") return ImageDetail::kLow;
  if (detail == "original") return ImageDetail::kOriginal;
  if (detail == "auto") return ImageDetail::kAuto;
  return ImageDetail::kHigh;
}

// An input_image part of a vision-capable model: its source, or why it cannot be used.
absl::StatusOr<ImageSource> ImageOf(const Json& part, const ContentPlace& place,
                                    std::size_t index) {
  const std::string where = absl::StrCat("input[", place.item, "]");
  const std::string part_path = absl::StrCat(where, ".content[", index, "]");
  std::string url, file_id;
  if (auto it = part.find("image_url"); it != part.end() && it->is_string()) url = *it;
  if (auto it = part.find("file_id"); it != part.end() && it->is_string()) file_id = *it;
  if (url.empty() && file_id.empty()) {
    return RequestError(absl::StrCat(part_path, ": input_image must have image_url or file_id"));
  }
  if (!url.empty() && !file_id.empty()) {
    return RequestError(
        absl::StrCat(part_path, ": input_image cannot have both image_url and file_id"));
  }
  if (!file_id.empty()) {
    return RequestError(absl::StrCat(
        part_path, ": file_id is not supported. Pass the image as a base64 data url instead."));
  }
  if (place.assistant) {
    return RequestError(absl::StrCat(where, ": Image in assistant message is unsupported"));
  }
  std::optional<ImageSource::Kind> kind = ImageUrlKind(url);
  if (!kind) return RequestError(absl::StrCat(where, ": Unsupported image_url format"));
  ImageSource source;
  source.kind = *kind;
  source.data = std::move(url);
  source.detail = DetailOf(part);
  source.path = where;
  return source;
}

// Outputs of the open assistant turn's calls, checked when the turn closes.
struct PendingCalls {
  std::size_t assistant = 0;          // index of the assistant message
  std::vector<std::string> call_ids;  // in call order
  std::set<std::string> answered;
  bool outputs_started = false;
};

class InputConverter {
 public:
  InputConverter(const ResponsesTools& tools, ModelVersion version)
      : tools_(tools), reads_images_(ReadsImages(version)), version_(version) {}

  absl::Status Add(const Json& item, std::size_t index) {
    if (!item.is_object()) return BodyError("invalid input item");
    auto type = item.find("type");
    if (type == item.end() || type->is_null()) {
      if (!item.contains("role")) return BodyError("invalid input item");
      return AddMessage(item, index);
    }
    if (!type->is_string()) return BodyError("invalid input item");
    const std::string kind = type->get<std::string>();
    if (kind == "message") return AddMessage(item, index);
    if (kind == "reasoning") return AddReasoning(item);
    if (kind == "function_call" || kind == "custom_tool_call") return AddCall(item, index, kind);
    if (kind == "function_call_output" || kind == "custom_tool_call_output") {
      return AddOutput(item, index);
    }
    return absl::OkStatus();  // items of server tools this stack does not run
  }

  absl::StatusOr<std::vector<Message>> Finish() {
    TANDEM_RETURN_IF_ERROR(CloseAssistant());
    return std::move(messages_);
  }

 private:
  absl::Status AddMessage(const Json& item, std::size_t index) {
    TANDEM_ASSIGN_OR_RETURN(
        std::optional<std::string> role,
        ReadVariant(item, "role", {"user", "assistant", "system", "developer"}));
    if (!role) return MissingField("role");
    auto content = item.find("content");
    if (content == item.end()) return MissingField("content");
    std::vector<ImageSource> images;
    std::vector<std::size_t> offsets;
    ContentPlace place{reads_images_, index, *role == "assistant", false};
    TANDEM_ASSIGN_OR_RETURN(std::string text,
                            ResponsesContentText(*content, place, images, offsets));
    if (*role == "assistant") {
      Message* assistant = OpenAssistantForText();
      if (!assistant) {
        TANDEM_RETURN_IF_ERROR(CloseAssistant());
        assistant = StartAssistant();
      }
      AppendPiece(assistant->content, text, "\n\n");
      return absl::OkStatus();
    }
    TANDEM_RETURN_IF_ERROR(CloseAssistant());
    Message message;
    // V4.1 has a system turn a developer message maps to; V4 hears the developer as the user.
    const bool system =
        *role == "system" || (*role == "developer" && version_ == ModelVersion::kDeepseekV41);
    message.role = system ? Role::kSystem : Role::kUser;
    message.content = std::move(text);
    message.image_sources = std::move(images);
    message.image_offsets = std::move(offsets);
    messages_.push_back(std::move(message));
    return absl::OkStatus();
  }

  absl::Status AddReasoning(const Json& item) {
    std::vector<std::string> pieces;
    if (auto content = item.find("content"); content != item.end() && !content->is_null()) {
      if (!content->is_array()) return InvalidType(*content, "a sequence");
      for (const Json& part : *content) {
        if (!part.is_object()) return InvalidType(part, "struct ResponsesReasoningContent");
        TANDEM_ASSIGN_OR_RETURN(std::string piece, RequireString(part, "text"));
        pieces.push_back(std::move(piece));
      }
    }
    std::string text = absl::StrJoin(pieces, "\n");
    if (text.empty()) return absl::OkStatus();
    // Reasoning opens a new assistant turn unless the open one holds only reasoning so far.
    Message* assistant = open_ ? &messages_[pending_.assistant] : nullptr;
    if (assistant && assistant->content.empty() && !assistant->tool_calls) {
      if (!assistant->reasoning_content) assistant->reasoning_content.emplace();
      AppendPiece(*assistant->reasoning_content, text, "\n");
      return absl::OkStatus();
    }
    TANDEM_RETURN_IF_ERROR(CloseAssistant());
    StartAssistant()->reasoning_content = std::move(text);
    return absl::OkStatus();
  }

  absl::Status AddCall(const Json& item, std::size_t index, const std::string& kind) {
    ToolCall call;
    TANDEM_ASSIGN_OR_RETURN(call.id, RequireString(item, "call_id"));
    TANDEM_ASSIGN_OR_RETURN(call.name, RequireString(item, "name"));
    if (kind == "function_call") {
      TANDEM_ASSIGN_OR_RETURN(call.arguments, RequireString(item, "arguments"));
      TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> space, ReadString(item, "namespace"));
      if (space) {
        auto it = tools_.namespaced_names.find({*space, call.name});
        const char* separator = version_ == ModelVersion::kDeepseekV41 ? "::" : "__";
        call.name = it != tools_.namespaced_names.end()
                        ? it->second
                        : absl::StrCat(*space, separator, call.name);
      }
    } else {
      TANDEM_ASSIGN_OR_RETURN(std::string input, RequireString(item, "input"));
      call.arguments = Json{{"input", input}}.dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    TANDEM_RETURN_IF_ERROR(CheckCallId(call.id, index));
    if (!seen_calls_.insert(call.id).second) {
      return RequestError(absl::StrCat("Duplicate 'call_id': ", call.id, "."));
    }
    Message* assistant =
        open_ && !pending_.outputs_started ? &messages_[pending_.assistant] : nullptr;
    if (!assistant) {
      TANDEM_RETURN_IF_ERROR(CloseAssistant());
      assistant = StartAssistant();
    }
    if (!assistant->tool_calls) assistant->tool_calls.emplace();
    pending_.call_ids.push_back(call.id);
    assistant->tool_calls->push_back(std::move(call));
    return absl::OkStatus();
  }

  absl::Status AddOutput(const Json& item, std::size_t index) {
    TANDEM_ASSIGN_OR_RETURN(std::string call_id, RequireString(item, "call_id"));
    auto output = item.find("output");
    if (output == item.end()) return MissingField("output");
    std::vector<ImageSource> images;
    std::vector<std::size_t> offsets;
    TANDEM_ASSIGN_OR_RETURN(
        std::string text,
        ResponsesContentText(*output, ContentPlace{reads_images_, index, false, true}, images,
                             offsets));
    TANDEM_RETURN_IF_ERROR(CheckCallId(call_id, index));
    if (seen_calls_.count(call_id) == 0) {
      return RequestError(
          absl::StrCat("No tool call found for tool output with call_id ", call_id, "."));
    }
    if (!answered_.insert(call_id).second) {
      return RequestError(absl::StrCat("Duplicate tool output for call_id: ", call_id, "."));
    }
    pending_.outputs_started = true;
    pending_.answered.insert(call_id);
    Message message;
    message.role = Role::kTool;
    message.content = std::move(text);
    message.tool_call_id = std::move(call_id);
    message.image_sources = std::move(images);
    message.image_offsets = std::move(offsets);
    messages_.push_back(std::move(message));
    return absl::OkStatus();
  }

  static absl::Status CheckCallId(const std::string& call_id, std::size_t index) {
    if (!call_id.empty()) return absl::OkStatus();
    return RequestError(absl::StrCat(
        "Invalid 'input[", index,
        "].call_id': empty string. Expected a string with minimum length 1, but got an empty "
        "string instead."));
  }

  static void AppendPiece(std::string& text, const std::string& piece, absl::string_view sep) {
    if (piece.empty()) return;
    if (!text.empty()) text.append(sep.data(), sep.size());
    text += piece;
  }

  // The open assistant turn if more text can join it (no calls yet).
  Message* OpenAssistantForText() {
    if (!open_) return nullptr;
    Message& assistant = messages_[pending_.assistant];
    return assistant.tool_calls ? nullptr : &assistant;
  }

  Message* StartAssistant() {
    Message message;
    message.role = Role::kAssistant;
    messages_.push_back(std::move(message));
    pending_ = PendingCalls{messages_.size() - 1, {}, {}, false};
    open_ = true;
    return &messages_.back();
  }

  absl::Status CloseAssistant() {
    if (!open_) return absl::OkStatus();
    open_ = false;
    for (const std::string& id : pending_.call_ids) {
      if (pending_.answered.count(id) == 0) {
        return RequestError(absl::StrCat("No tool output found for tool call ", id, "."));
      }
    }
    // deepseek-recipe keys a turn's calls by id: calls and their outputs come out in id order.
    if (auto& calls = messages_[pending_.assistant].tool_calls) {
      std::stable_sort(calls->begin(), calls->end(),
                       [](const ToolCall& a, const ToolCall& b) { return a.id < b.id; });
    }
    std::stable_sort(
        messages_.begin() + pending_.assistant + 1, messages_.end(),
        [](const Message& a, const Message& b) { return *a.tool_call_id < *b.tool_call_id; });
    return absl::OkStatus();
  }

  const ResponsesTools& tools_;
  const bool reads_images_;
  const ModelVersion version_;
  std::vector<Message> messages_;
  PendingCalls pending_;
  bool open_ = false;
  std::set<std::string> seen_calls_;
  std::set<std::string> answered_;
};

}  // namespace

absl::StatusOr<std::string> ResponsesContentText(const Json& content, const ContentPlace& place,
                                                 std::vector<ImageSource>& images,
                                                 std::vector<std::size_t>& offsets) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return BodyError(place.tool_output
                         ? "output should be a string or a list of output content parts"
                         : "content should be a string or a list of content blocks");
  }
  for (const Json& part : content) TANDEM_RETURN_IF_ERROR(CheckPartShape(part, place.tool_output));
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    if (i > 0) text += "\n\n";
    const Json& part = content[i];
    const std::string type = part["type"].get<std::string>();
    if (type == "input_text" || type == "output_text") {
      text += part["text"].get<std::string>();
    } else if (type == "input_file") {
      // This stack has no document path: the model reads a placeholder instead.
      text += kUnsupportedDocument;
    } else if (!place.reads_images) {
      text.append(kUnsupportedImage.data(), kUnsupportedImage.size());
    } else {
      TANDEM_ASSIGN_OR_RETURN(ImageSource image, ImageOf(part, place, i));
      images.push_back(std::move(image));
      offsets.push_back(text.size());
      text.append(kImageToken.data(), kImageToken.size());
    }
  }
  return text;
}

absl::StatusOr<std::vector<Message>> ConvertResponsesInput(const Json& input,
                                                           const ResponsesTools& tools,
                                                           ModelVersion version) {
  if (input.is_string()) {
    Message message;
    message.content = input.get<std::string>();
    return std::vector<Message>{std::move(message)};
  }
  if (!input.is_array()) {
    return BodyError("input should be a string or a list of input items");
  }
  if (input.empty()) return RequestError("Input items array must not be empty");
  InputConverter converter(tools, version);
  for (std::size_t i = 0; i < input.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(converter.Add(input[i], i));
  }
  return converter.Finish();
}

}  // namespace tandem::recipe::internal
