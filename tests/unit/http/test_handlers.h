#pragma once

#include <string>

#include "tandem/http/router.h"

namespace tandem::http::testing {

// A handler that always answers `body` with 200.
inline Handler Fixed(std::string body) {
  return [body = std::move(body)](const Request&) -> HandlerResult {
    return Response::Text(200, body);
  };
}

}  // namespace tandem::http::testing
