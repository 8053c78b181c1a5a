// Messages `messages` -> conversation messages, with Anthropic's pairing rule: the tool_use blocks
// of an assistant message end it, and the next message is a user message that opens with one
// tool_result per tool_use.

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convert/convert_messages_internal.h"
#include "render/render_json.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe::internal {
namespace {

constexpr std::initializer_list<absl::string_view> kBlockTypes = {"text",
                                                                  "image",
                                                                  "document",
                                                                  "thinking",
                                                                  "server_tool_use",
                                                                  "tool_use",
                                                                  "tool_result",
                                                                  "web_search_tool_result",
                                                                  "tool_addition"};

absl::Status CheckToolResultContent(const Json& block) {
  auto content = block.find("content");
  if (content == block.end() || content->is_null() || content->is_string()) return absl::OkStatus();
  if (!content->is_array()) return BodyError("expected a string or a list");
  for (const Json& part : *content) {
    if (!part.is_object())
      return InvalidType(part, "internally tagged enum MessagesToolResultBlock");
    TANDEM_ASSIGN_OR_RETURN(std::string type,
                            RequireTag(part, {"text", "image", "document", "tool_reference"}));
    if (type == "text") TANDEM_RETURN_IF_ERROR(RequireString(part, "text").status());
  }
  return absl::OkStatus();
}

absl::Status CheckBlock(const Json& block) {
  if (!block.is_object()) return InvalidType(block, "internally tagged enum MessagesContentBlock");
  TANDEM_ASSIGN_OR_RETURN(std::string type, RequireTag(block, kBlockTypes));
  if (type == "text") return RequireString(block, "text").status();
  if (type == "image") {
    auto source = block.find("source");
    if (source == block.end()) return MissingField("source");
    if (!source->is_object())
      return InvalidType(*source, "internally tagged enum MessagesImageSource");
    return RequireTag(*source, {"base64", "url", "file"}).status();
  }
  if (type == "document" && !block.contains("source")) return MissingField("source");
  if (type == "thinking") return RequireString(block, "thinking").status();
  if (type == "tool_use") {
    TANDEM_RETURN_IF_ERROR(RequireString(block, "id").status());
    TANDEM_RETURN_IF_ERROR(RequireString(block, "name").status());
    if (!block.contains("input")) return MissingField("input");
  }
  if (type == "tool_result") {
    TANDEM_RETURN_IF_ERROR(RequireString(block, "tool_use_id").status());
    TANDEM_RETURN_IF_ERROR(ReadBool(block, "is_error").status());
    return CheckToolResultContent(block);
  }
  return absl::OkStatus();
}

std::string DocumentPlaceholder(const Json& block) {
  const Json& source = block["source"];
  std::string media_type = "unknown";
  if (source.is_object()) {
    if (auto it = source.find("media_type"); it != source.end() && it->is_string()) {
      media_type = it->get<std::string>();
    }
  }
  return absl::StrCat("[Unsupported document type: ", media_type, "]");
}

// The source of an image block for a vision-capable model, or why it cannot be used.
absl::StatusOr<ImageSource> ImageOf(const Json& block, const std::string& block_path,
                                    std::string source_path) {
  const Json& source = block["source"];
  const std::string type = source["type"].get<std::string>();
  ImageSource image;
  image.path = std::move(source_path);
  if (type == "file") {
    return RequestError(absl::StrCat(
        block_path, ": file_id is not supported. Pass the image as a base64 data url instead."));
  }
  if (type == "url") {
    TANDEM_ASSIGN_OR_RETURN(image.data, RequireString(source, "url"));
    if (ImageUrlKind(image.data) != ImageSource::Kind::kUrl) {
      return RequestError(absl::StrCat(
          block_path, ": invalid url: ", ToJson(Json(image.data), JsonStyle::kCompact)));
    }
    image.kind = ImageSource::Kind::kUrl;
    return image;
  }
  TANDEM_ASSIGN_OR_RETURN(std::string media_type, RequireString(source, "media_type"));
  TANDEM_ASSIGN_OR_RETURN(std::string data, RequireString(source, "data"));
  image.kind = ImageSource::Kind::kDataUrl;
  image.data = absl::StrCat("data:", media_type, ";base64,", data);
  return image;
}

std::string MissingResults(absl::string_view where, const std::vector<std::string>& ids) {
  return absl::StrCat(where,
                      "`tool_use` ids were found without `tool_result` blocks immediately after: ",
                      absl::StrJoin(ids, ", "),
                      ". Each `tool_use` block must have a corresponding `tool_result` block in "
                      "the next message.");
}

class TurnConverter {
 public:
  TurnConverter(const ConversionOptions& options, ModelVersion version, std::vector<Message>& out)
      : options_(options), reads_images_(ReadsImages(version)), version_(version), out_(out) {}

  absl::Status Add(const MessagesTurn& turn, std::size_t index) {
    const Json& content = *turn.content;
    if (content.is_array() && content.empty()) {
      return RequestError(
          absl::StrCat("messages.", index, ": all messages must have non-empty content"));
    }
    if (turn.role == "user") return AddUser(content, index);
    if (!pending_.empty()) {
      return RequestError(MissingResults(absl::StrCat("messages.", index, ": "), pending_));
    }
    if (turn.role == "assistant") return AddAssistant(content, index);
    return AddSystem(content);
  }

  absl::Status Finish() {
    if (pending_.empty()) return absl::OkStatus();
    return RequestError(MissingResults(absl::StrCat("messages.", calling_index_, ":"), pending_));
  }

 private:
  absl::Status AddUser(const Json& content, std::size_t index) {
    const std::vector<std::string> expected = std::move(pending_);
    pending_.clear();
    std::set<std::string> answered;
    std::optional<std::vector<std::string>> missing_for_caller;
    bool leading = true;  // still in the run of tool_result blocks that opens the message
    auto end_leading_run = [&]() -> absl::Status {
      if (!leading) return absl::OkStatus();
      leading = false;
      std::vector<std::string> missing;
      for (const std::string& id : expected) {
        if (answered.count(id) == 0) missing.push_back(id);
      }
      if (missing.empty()) return absl::OkStatus();
      return RequestError(MissingResults(absl::StrCat("messages.", index, ": "), missing));
    };
    if (content.is_string()) {
      TANDEM_RETURN_IF_ERROR(end_leading_run());
      PushUser(content.get<std::string>());
      return absl::OkStatus();
    }
    const bool only_results = std::all_of(content.begin(), content.end(),
                                          [](const Json& b) { return b["type"] == "tool_result"; });
    if (only_results) {
      // The results of a message that is nothing but results are missing for good: reported
      // against the calling message.
      for (const Json& block : content) answered.insert(block["tool_use_id"].get<std::string>());
      std::vector<std::string> missing;
      for (const std::string& id : expected) {
        if (answered.count(id) == 0) missing.push_back(id);
      }
      answered.clear();
      if (!missing.empty()) {
        // Unknown or repeated ids are reported first, by the block loop below.
        missing_for_caller = std::move(missing);
      }
    }
    for (std::size_t j = 0; j < content.size(); ++j) {
      const Json& block = content[j];
      const std::string type = block["type"].get<std::string>();
      if (type == "tool_result") {
        const std::string id = block["tool_use_id"].get<std::string>();
        if (std::find(expected.begin(), expected.end(), id) == expected.end()) {
          return RequestError(absl::StrCat(
              "unexpected `messages.", index, ".content.", j,
              ": tool_use_id` found in `tool_result` blocks: ", id,
              ". Each `tool_result` block must have a corresponding `tool_use` block in the "
              "previous message."));
        }
        if (!answered.insert(id).second) {
          return RequestError(absl::StrCat(
              "messages.", index, ".content.", j,
              ": each tool_use must have a single result. Found multiple `tool_result` blocks "
              "with id: ",
              id));
        }
        if (!leading) continue;
        Message message;
        message.role = Role::kTool;
        TANDEM_ASSIGN_OR_RETURN(message.content, ToolResultText(block, index, j, message));
        message.tool_call_id = id;
        out_.push_back(std::move(message));
        continue;
      }
      TANDEM_RETURN_IF_ERROR(end_leading_run());
      if (type == "text") {
        PushUser(block["text"].get<std::string>());
      } else if (type == "image") {
        if (!reads_images_) {
          PushUser(std::string(kUnsupportedImage));
          continue;
        }
        const std::string path = absl::StrCat("messages.", index, ".content[", j, "]");
        TANDEM_ASSIGN_OR_RETURN(ImageSource image, ImageOf(block, path, path));
        PushUser(std::string(kImageToken));
        out_.back().image_sources.push_back(std::move(image));
        out_.back().image_offsets.push_back(0);
      } else if (type == "document") {
        PushUser(DocumentPlaceholder(block));
      } else if (type == "thinking") {
        return RequestError(absl::StrCat(
            "messages.", index, ".content: thinking blocks may only be in `assistant` messages"));
      } else if (type == "tool_addition") {
        return RequestError(absl::StrCat(
            "messages.", index, ": `tool_addition` blocks can only be in `system` messages"));
      } else {
        TANDEM_RETURN_IF_ERROR(CheckAssistantOnly(type, index));
      }
    }
    if (missing_for_caller) {
      return RequestError(
          MissingResults(absl::StrCat("messages.", calling_index_, ":"), *missing_for_caller));
    }
    return end_leading_run();
  }

  absl::Status CheckAssistantOnly(const std::string& type, std::size_t index) {
    if (type == "server_tool_use" || type == "web_search_tool_result") {
      if (options_.messages_web_search == WebSearchBehavior::kReject) {
        return RequestError("Unsupported content block: server tools are not supported");
      }
    }
    return RequestError(absl::StrCat("messages.", index, ": `", type,
                                     "` blocks can only be in `assistant` messages"));
  }

  absl::Status AddAssistant(const Json& content, std::size_t index) {
    Message message;
    message.role = Role::kAssistant;
    if (content.is_string()) {
      message.content = content.get<std::string>();
      out_.push_back(std::move(message));
      return absl::OkStatus();
    }
    std::vector<std::string> texts, thoughts, ids;
    for (std::size_t j = 0; j < content.size(); ++j) {
      const Json& block = content[j];
      const std::string type = block["type"].get<std::string>();
      if (type == "thinking") {
        thoughts.push_back(block["thinking"].get<std::string>());
        continue;
      }
      if (type == "tool_use") {
        const std::string id = block["id"].get<std::string>();
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
          return RequestError(
              absl::StrCat("messages.", index, ".content.", j, ": `tool_use` ids must be unique"));
        }
        ids.push_back(id);
        if (!message.tool_calls) message.tool_calls.emplace();
        message.tool_calls->push_back(
            ToolCall{id, block["name"].get<std::string>(), PythonStyleJson(block["input"])});
        continue;
      }
      if (type == "tool_result") {
        return RequestError(absl::StrCat("messages.", index,
                                         ": `tool_result` blocks can only be in `user` messages"));
      }
      if (type == "server_tool_use" || type == "web_search_tool_result") {
        if (options_.messages_web_search == WebSearchBehavior::kReject) {
          return RequestError("Unsupported content block: server tools are not supported");
        }
        continue;
      }
      if (type == "tool_addition") {
        return RequestError(absl::StrCat(
            "messages.", index, ": `tool_addition` blocks can only be in `system` messages"));
      }
      // Text after a tool_use would sit between the calls and their results.
      if (!ids.empty()) {
        return RequestError(MissingResults(absl::StrCat("messages.", index, ".", j, ": "), ids));
      }
      if (type == "text") {
        texts.push_back(block["text"].get<std::string>());
      } else if (type == "image") {
        if (reads_images_) return RequestError("Image in assistant message is unsupported");
        texts.push_back(std::string(kUnsupportedImage));
      } else {
        texts.push_back(DocumentPlaceholder(block));
      }
    }
    // Text blocks are appended to what came before with a blank line, to nothing without one
    // (thinking blocks are plainly joined).
    auto non_empty = [](const std::vector<std::string>& pieces) {
      std::string joined;
      for (const std::string& piece : pieces) {
        if (!joined.empty()) joined += "\n\n";
        joined += piece;
      }
      return joined;
    };
    message.content = non_empty(texts);
    if (!thoughts.empty()) message.reasoning_content = absl::StrJoin(thoughts, "\n\n");
    out_.push_back(std::move(message));
    pending_ = std::move(ids);
    calling_index_ = index;
    return absl::OkStatus();
  }

  // A system message inside the conversation: a system turn for V4.1, for V4 a reminder in the
  // user turn.
  absl::Status AddSystem(const Json& content) {
    std::string text;
    if (content.is_string()) {
      text = content.get<std::string>();
    } else {
      std::vector<std::string> pieces;
      for (const Json& block : content) {
        if (block["type"] == "text") pieces.push_back(block["text"].get<std::string>());
      }
      text = absl::StrJoin(pieces, "\n\n");
    }
    if (version_ == ModelVersion::kDeepseekV41) {
      Message message;
      message.role = Role::kSystem;
      message.content = std::move(text);
      out_.push_back(std::move(message));
      return absl::OkStatus();
    }
    PushUser(absl::StrCat("<system-reminder>\n", text, "\n</system-reminder>"));
    return absl::OkStatus();
  }

  void PushUser(std::string text) {
    Message message;
    message.role = Role::kUser;
    message.content = std::move(text);
    out_.push_back(std::move(message));
  }

  // A tool result's text; images of a vision-capable model go to `images`.
  absl::StatusOr<std::string> ToolResultText(const Json& block, std::size_t index, std::size_t j,
                                             Message& message) {
    auto content = block.find("content");
    if (content == block.end() || content->is_null()) return std::string();
    if (content->is_string()) return content->get<std::string>();
    std::string text;
    const std::string block_path = absl::StrCat("messages.", index, ".content[", j, "]");
    bool first = true;
    for (const Json& part : *content) {
      const std::string type = part["type"].get<std::string>();
      if (type != "text" && type != "document" && type != "image") continue;
      if (!first) text += "\n\n";
      first = false;
      if (type == "text") {
        text += part["text"].get<std::string>();
      } else if (type == "document") {
        text += DocumentPlaceholder(part);
      } else if (!reads_images_) {
        text.append(kUnsupportedImage.data(), kUnsupportedImage.size());
      } else {
        TANDEM_ASSIGN_OR_RETURN(
            ImageSource image,
            ImageOf(part, block_path,
                    absl::StrCat("messages.", index, ".content.", j, ".tool_result")));
        message.image_sources.push_back(std::move(image));
        message.image_offsets.push_back(text.size());
        text.append(kImageToken.data(), kImageToken.size());
      }
    }
    return text;
  }

  const ConversionOptions& options_;
  const bool reads_images_;
  const ModelVersion version_;
  std::vector<Message>& out_;
  std::vector<std::string> pending_;  // tool_use ids of the previous assistant message
  std::size_t calling_index_ = 0;     // that message's index
};

}  // namespace

absl::StatusOr<std::vector<MessagesTurn>> ReadMessagesTurns(const Json& messages) {
  if (!messages.is_array()) return InvalidType(messages, "a sequence");
  std::vector<MessagesTurn> turns;
  for (const Json& entry : messages) {
    if (!entry.is_object()) return InvalidType(entry, "adjacently tagged enum MessagesMessage");
    TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> role,
                            ReadVariant(entry, "role", {"user", "assistant", "system"}));
    if (!role) return MissingField("role");
    auto content = entry.find("content");
    if (content == entry.end()) return MissingField("content");
    if (content->is_array()) {
      for (const Json& block : *content) TANDEM_RETURN_IF_ERROR(CheckBlock(block));
    } else if (!content->is_string()) {
      return BodyError("expected a string or a list");
    }
    turns.push_back(MessagesTurn{*role, &*content});
  }
  return turns;
}

absl::Status ConvertMessagesTurns(const std::vector<MessagesTurn>& turns,
                                  const ConversionOptions& options, ModelVersion version,
                                  std::vector<Message>& out) {
  TurnConverter converter(options, version, out);
  for (std::size_t i = 0; i < turns.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(converter.Add(turns[i], i));
  }
  return converter.Finish();
}

}  // namespace tandem::recipe::internal
