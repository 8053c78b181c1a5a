#include "api/api_routes.h"

#include "api/json_text.h"
#include "tandem/base/status_macros.h"

namespace tandem::router {
namespace {

http::Response Counted(const RouteDeps& deps, const char* endpoint, http::Response response) {
  if (deps.metrics != nullptr) deps.metrics->CountRequest(endpoint, response.status);
  return response;
}

}  // namespace

absl::Status InstallRoutes(http::Router* router, const RouteDeps& deps) {
  TANDEM_RETURN_IF_ERROR(router->Handle("POST", "/v1/completions", [deps](const http::Request& r) {
    return deps.generation->Handle(r);
  }));
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/chat/completions", [deps](const http::Request& r) {
        return deps.protocols->Handle(recipe::Protocol::kChatCompletions, r);
      }));
  TANDEM_RETURN_IF_ERROR(router->Handle("POST", "/v1/responses", [deps](const http::Request& r) {
    return deps.protocols->Handle(recipe::Protocol::kResponses, r);
  }));
  TANDEM_RETURN_IF_ERROR(router->Handle("POST", "/v1/messages", [deps](const http::Request& r) {
    return deps.protocols->Handle(recipe::Protocol::kMessages, r);
  }));
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/messages/count_tokens",
                     [deps](const http::Request& r) { return deps.protocols->CountTokens(r); }));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/v1/models", [deps](const http::Request&) {
    nlohmann::json model = {{"id", deps.served_model},
                            {"object", "model"},
                            {"created", deps.created_unix_s},
                            {"owned_by", "tandem"}};
    nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model})}};
    return http::HandlerResult(
        Counted(deps, "/v1/models", http::Response::Json(200, DumpJson(body))));
  }));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/health", [deps](const http::Request&) {
    return http::HandlerResult(Counted(deps, "/health", http::Response::Text(200, "ok\n")));
  }));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/ready", [deps](const http::Request&) {
    const WorkerRegistry::Readiness ready = deps.registry->Ready(deps.served_model);
    http::Response response = ready.ready ? http::Response::Text(200, "ready\n")
                                          : http::Response::Text(503, ready.reason + "\n");
    return http::HandlerResult(Counted(deps, "/ready", std::move(response)));
  }));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/metrics", [deps](const http::Request&) {
    // Refresh lease state so worker_up is current even when no request asked lately.
    deps.registry->ExpireLeases();
    http::Response response = http::Response::Text(200, deps.metrics_registry->RenderText());
    response.content_type = std::string(metrics::Registry::kContentType);
    return http::HandlerResult(Counted(deps, "/metrics", std::move(response)));
  }));
  return absl::OkStatus();
}

}  // namespace tandem::router
