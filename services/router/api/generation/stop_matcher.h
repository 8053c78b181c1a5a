#pragma once

#include <string>
#include <vector>

namespace tandem::router {

// Applies OpenAI stop sequences to streamed text: text is released only once it can no longer be
// the start of a stop sequence, and generation ends before the first sequence that matches.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what may be sent now. After a match, the text before it is returned,
  // stopped() becomes true, and later input is ignored.
  std::string Push(const std::string& text);
  // The held-back tail, once the generation ended without a match.
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some stop sequence.
  size_t PartialMatchLength() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tandem::router
