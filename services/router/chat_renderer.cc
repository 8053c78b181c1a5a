#include "chat_renderer.h"

namespace tandem::router {

absl::StatusOr<std::string> PlainChatRenderer::Render(
    const std::vector<ChatMessage>& messages) const {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0) out += "\n";
    out += messages[i].content;
  }
  return out;
}

}  // namespace tandem::router
