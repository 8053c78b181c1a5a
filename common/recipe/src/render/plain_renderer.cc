#include "tandem/recipe/render.h"

namespace tandem::recipe {

RenderedPrompt RenderPlainConversation(const Conversation& conversation) {
  RenderedPrompt out;
  for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
    if (i > 0) out.prompt.push_back('\n');
    out.prompt += conversation.messages[i].content;
  }
  return out;
}

}  // namespace tandem::recipe
