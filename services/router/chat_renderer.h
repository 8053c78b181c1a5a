#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::router {

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
};

// Turns chat messages into the prompt text a model was trained on. Model families with a chat
// format (DeepSeek) plug their own renderer in.
class ChatRenderer {
 public:
  virtual ~ChatRenderer() = default;
  virtual absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages) const = 0;
};

// For models without a chat format: the contents joined by "\n", so a single user message is
// exactly its text.
class PlainChatRenderer final : public ChatRenderer {
 public:
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages) const override;
};

}  // namespace tandem::router
