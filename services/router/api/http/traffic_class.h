#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/http/message.h"

namespace tandem::router {

// Which KV retention class (chat, agent) a request belongs to: the X-Tandem-Traffic-Class header,
// else the class configured for the caller's API key (Authorization: Bearer KEY or x-api-key),
// else "" (the workers' default).
class TrafficClassifier {
 public:
  // `api_key_classes`: "key=class,key=class" (--api-key-traffic-classes); empty: none.
  static absl::StatusOr<TrafficClassifier> Parse(absl::string_view api_key_classes);

  // InvalidArgument names the header when it holds something other than chat or agent.
  absl::StatusOr<std::string> Classify(const http::Request& request) const;

 private:
  absl::flat_hash_map<std::string, std::string> class_by_key_;
};

}  // namespace tandem::router
