#include "api/generation/stop_matcher.h"

#include <algorithm>

namespace tandem::router {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));  // an empty sequence would match everywhere
  }
}

std::string StopMatcher::Push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  const size_t keep = PartialMatchLength();
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return "";
  std::string out;
  out.swap(held_);
  return out;
}

size_t StopMatcher::PartialMatchLength() const {
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, held_.size());
    for (size_t len = max_len; len > longest; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace tandem::router
