#include "api/endpoints/chat_format.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::router {
namespace {

// The checkpoint's model_type, or "" when there is no readable HF config (llama2.c checkpoints).
std::string ModelType(const std::string& model_dir) {
  const std::filesystem::path config = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(config);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("model_type") || !j["model_type"].is_string()) return "";
  return j["model_type"].get<std::string>();
}

}  // namespace

absl::StatusOr<ChatFormat> ResolveChatFormat(absl::string_view flag, const std::string& model_dir) {
  if (flag == "plain") return ChatFormat::kPlain;
  if (flag == "deepseek-v4") return ChatFormat::kDeepseekV4;
  if (flag == "deepseek-v4.1") return ChatFormat::kDeepseekV41;
  if (flag == "auto") {
    return ModelType(model_dir) == "deepseek_v4" ? ChatFormat::kDeepseekV4 : ChatFormat::kPlain;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--chat-format must be auto, plain, deepseek-v4 or deepseek-v4.1, got '", flag, "'"));
}

absl::string_view ChatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kPlain:
      return "plain";
    case ChatFormat::kDeepseekV4:
      return "deepseek-v4";
    case ChatFormat::kDeepseekV41:
      return "deepseek-v4.1";
  }
  return "unknown";
}

recipe::ModelVersion ModelVersionOf(ChatFormat format) {
  return format == ChatFormat::kDeepseekV41 ? recipe::ModelVersion::kDeepseekV41
                                            : recipe::ModelVersion::kDeepseekV4;
}

}  // namespace tandem::router
