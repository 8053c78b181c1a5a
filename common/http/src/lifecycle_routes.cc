#include "tandem/http/lifecycle_routes.h"

#include <utility>

namespace tandem::http {

void AddLifecycleRoutes(Router& routes, std::function<std::optional<std::string>()> not_ready,
                        std::function<void()> drain) {
  for (const char* path : {"/live", "/health"}) {
    routes.Handle("GET", path, [](const Request&) -> HandlerResult {
            return Response::Text(200, "ok\n");
          })
        .IgnoreError();
  }
  routes.Handle("GET", "/ready", [not_ready = std::move(not_ready)](const Request&) -> HandlerResult {
          if (std::optional<std::string> reason = not_ready(); reason.has_value()) {
            return Response::Text(503, *reason + "\n");
          }
          return Response::Text(200, "ready\n");
        })
      .IgnoreError();
  const auto drain_handler = [drain = std::move(drain)](const Request&) -> HandlerResult {
    drain();
    return Response::Text(200, "draining\n");
  };
  routes.Handle("GET", "/drain", drain_handler).IgnoreError();
  routes.Handle("POST", "/drain", drain_handler).IgnoreError();
}

}  // namespace tandem::http
