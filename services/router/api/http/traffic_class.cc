#include "api/http/traffic_class.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tandem::router {
namespace {

bool KnownClass(absl::string_view cls) { return cls == "chat" || cls == "agent"; }

}  // namespace

absl::StatusOr<TrafficClassifier> TrafficClassifier::Parse(absl::string_view api_key_classes) {
  TrafficClassifier classifier;
  for (absl::string_view entry : absl::StrSplit(api_key_classes, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view cls = absl::StripAsciiWhitespace(kv.second);
    if (key.empty() || !KnownClass(cls)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api-key-traffic-classes: '", entry, "' is not KEY=chat or KEY=agent"));
    }
    classifier.class_by_key_[std::string(key)] = std::string(cls);
  }
  return classifier;
}

absl::StatusOr<std::string> TrafficClassifier::Classify(const http::Request& request) const {
  if (auto header = request.FindHeader("X-Tandem-Traffic-Class")) {
    if (!KnownClass(*header)) {
      return absl::InvalidArgumentError(
          absl::StrCat("X-Tandem-Traffic-Class must be chat or agent, got '", *header, "'"));
    }
    return std::string(*header);
  }
  if (class_by_key_.empty()) return std::string();
  absl::string_view key;
  if (auto auth = request.FindHeader("Authorization")) {
    key = *auth;
    if (!absl::ConsumePrefix(&key, "Bearer ")) key = {};
  }
  if (key.empty()) {
    if (auto anthropic_key = request.FindHeader("x-api-key")) key = *anthropic_key;
  }
  auto it = class_by_key_.find(std::string(absl::StripAsciiWhitespace(key)));
  return it == class_by_key_.end() ? std::string() : it->second;
}

}  // namespace tandem::router
