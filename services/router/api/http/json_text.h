#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace tandem::router {

// Serialises `value`; invalid UTF-8 (e.g. in an echoed error message) becomes U+FFFD instead of
// throwing.
inline std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::router
