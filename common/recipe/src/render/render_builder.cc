#include "render/render_builder.h"

#include <array>

namespace tandem::recipe::internal {
namespace {

// The spellings a template string may contain (longest first where one is a prefix of another).
constexpr std::array<absl::string_view, 9> kTemplateSpecials = {
    kBosToken,         kEosToken,           kUserToken,
    kAssistantToken,   kSystemToken,        kLatestReminderToken,
    kThinkingEndToken, kThinkingStartToken, kDsmlToken,
};

}  // namespace

void PromptBuilder::Special(absl::string_view spelling) {
  const std::size_t begin = out_.prompt.size();
  out_.prompt.append(spelling.data(), spelling.size());
  out_.special_ranges.emplace_back(begin, out_.prompt.size());
}

void PromptBuilder::Template(absl::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t best = absl::string_view::npos;
    absl::string_view best_spelling;
    for (absl::string_view spelling : kTemplateSpecials) {
      const std::size_t at = text.find(spelling, pos);
      if (at < best) {
        best = at;
        best_spelling = spelling;
      }
    }
    if (best == absl::string_view::npos) {
      Text(text.substr(pos));
      return;
    }
    Text(text.substr(pos, best - pos));
    Special(best_spelling);
    pos = best + best_spelling.size();
  }
}

void PromptBuilder::TextWithImages(absl::string_view text, std::size_t placeholders,
                                   const std::vector<std::size_t>& offsets) {
  std::size_t pos = 0;
  if (!offsets.empty()) {
    for (std::size_t at : offsets) {
      if (at < pos || text.substr(at, kImageToken.size()) != kImageToken) continue;
      Text(text.substr(pos, at - pos));
      Special(kImageToken);
      pos = at + kImageToken.size();
    }
    Text(text.substr(pos));
    return;
  }
  while (placeholders > 0) {
    const std::size_t at = text.find(kImageToken, pos);
    if (at == absl::string_view::npos) break;
    Text(text.substr(pos, at - pos));
    Special(kImageToken);
    pos = at + kImageToken.size();
    --placeholders;
  }
  Text(text.substr(pos));
}

}  // namespace tandem::recipe::internal
