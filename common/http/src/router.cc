#include "tandem/http/router.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::http {
namespace {

// RFC 9110 token characters.
bool IsToken(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                    absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::Status Router::Handle(absl::string_view method, absl::string_view path, Handler handler) {
  if (!IsToken(method)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid HTTP method '", method, "'"));
  }
  if (path.empty() || path[0] != '/' || path.find('?') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("route path '", path, "' must start with '/' and have no query"));
  }
  if (!handler) {
    return absl::InvalidArgumentError(absl::StrCat("route ", method, " ", path, ": null handler"));
  }
  auto& methods = routes_[std::string(path)];
  if (!methods.emplace(std::string(method), std::move(handler)).second) {
    return absl::AlreadyExistsError(absl::StrCat("route ", method, " ", path, " already exists"));
  }
  return absl::OkStatus();
}

Router::Match Router::Find(absl::string_view method, absl::string_view path) const {
  Match match;
  auto by_path = routes_.find(path);
  if (by_path == routes_.end()) return match;
  auto by_method = by_path->second.find(std::string(method));
  if (by_method != by_path->second.end()) {
    match.handler = &by_method->second;
    return match;
  }
  match.allowed_methods = absl::StrJoin(by_path->second, ", ", [](std::string* out, const auto& kv) {
    out->append(kv.first);
  });
  return match;
}

}  // namespace tandem::http
