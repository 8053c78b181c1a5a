#pragma once

// Builds a RenderedPrompt from pieces, keeping the control-token ranges: the template's own text
// may contain control spellings (the tool instructions mention <think> and the DSML marker), user
// text never does, whatever it holds.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe::internal {

class PromptBuilder {
 public:
  // One control token.
  void Special(absl::string_view spelling);
  // Client-controlled text: always plain, even if it spells a control token.
  void Text(absl::string_view text) { out_.prompt.append(text.data(), text.size()); }
  // Fixed template text: every control spelling inside it is a control token.
  void Template(absl::string_view text);
  // Client text whose image placeholders are at `offsets` (image-token spellings elsewhere stay
  // text) or, with no offsets, are the first `placeholders` occurrences of the image token.
  void TextWithImages(absl::string_view text, std::size_t placeholders,
                      const std::vector<std::size_t>& offsets = {});

  std::string* mutable_prompt() { return &out_.prompt; }
  RenderedPrompt Finish() { return std::move(out_); }

 private:
  RenderedPrompt out_;
};

}  // namespace tandem::recipe::internal
