#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/render.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace tandem::recipe {

absl::StatusOr<std::vector<std::int32_t>> EncodePrompt(const RenderedPrompt& rendered,
                                                       const tokenizer::HfBpeTokenizer& tokenizer) {
  std::vector<std::int32_t> ids;
  const absl::string_view prompt = rendered.prompt;
  auto encode_text = [&](std::size_t begin, std::size_t end) -> absl::Status {
    if (begin >= end) return absl::OkStatus();
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::int32_t> text_ids,
                            tokenizer.Encode(prompt.substr(begin, end - begin), false));
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
    return absl::OkStatus();
  };
  std::size_t pos = 0;
  for (const auto& [begin, end] : rendered.special_ranges) {
    if (begin < pos || end < begin || end > prompt.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rendered prompt: control range [", begin,
                                                     ", ", end,
                                                     ") is out of order or outside the prompt"));
    }
    TANDEM_RETURN_IF_ERROR(encode_text(pos, begin));
    const absl::string_view spelling = prompt.substr(begin, end - begin);
    const std::int32_t id = tokenizer.TokenToId(spelling);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the tokenizer has no control token \"", spelling, "\""));
    }
    ids.push_back(id);
    pos = end;
  }
  TANDEM_RETURN_IF_ERROR(encode_text(pos, prompt.size()));
  return ids;
}

}  // namespace tandem::recipe
