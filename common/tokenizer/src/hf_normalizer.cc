#include "hf_normalizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tandem/base/status_macros.h"

namespace tandem::tokenizer::internal {

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const Json* json) {
  auto n = std::make_unique<Normalizer>();
  if (json != nullptr) TANDEM_RETURN_IF_ERROR(AddSteps(*json, "normalizer", n.get()));
  return n;
}

absl::Status Normalizer::AddSteps(const Json& json, const std::string& where, Normalizer* out) {
  TANDEM_ASSIGN_OR_RETURN(std::string type, StringField(json, where, "type"));
  if (type == "Sequence") {
    TANDEM_ASSIGN_OR_RETURN(const Json* list, Field(json, where, "normalizers"));
    if (!list->is_array()) return FieldError(where + ".normalizers", "expected an array");
    for (std::size_t i = 0; i < list->size(); ++i) {
      TANDEM_RETURN_IF_ERROR(AddSteps((*list)[i], absl::StrCat(where, ".normalizers[", i, "]"), out));
    }
    return absl::OkStatus();
  }
  if (type == "Prepend") {
    TANDEM_ASSIGN_OR_RETURN(std::string prepend, StringField(json, where, "prepend"));
    if (!prepend.empty()) out->steps_.push_back({prepend, "", ""});
    return absl::OkStatus();
  }
  if (type == "Replace") {
    TANDEM_ASSIGN_OR_RETURN(const Json* pattern, Field(json, where, "pattern"));
    const Json* literal = OptionalField(*pattern, "String");
    if (literal == nullptr || !literal->is_string()) {
      return FieldError(where + ".pattern", "only {\"String\": ...} patterns are supported");
    }
    TANDEM_ASSIGN_OR_RETURN(std::string content, StringField(json, where, "content"));
    if (!literal->get<std::string>().empty()) {
      out->steps_.push_back({"", literal->get<std::string>(), content});
    }
    return absl::OkStatus();
  }
  return FieldError(where + ".type", absl::StrCat("unsupported normalizer '", type, "'"));
}

std::string Normalizer::Normalize(absl::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    if (step.pattern.empty()) {
      if (!out.empty()) out.insert(0, step.prepend);
    } else {
      out = absl::StrReplaceAll(out, {{step.pattern, step.content}});
    }
  }
  return out;
}

}  // namespace tandem::tokenizer::internal
