#include "api/http/api_routes.h"

#include "api/http/json_text.h"
#include "tandem/base/status_macros.h"

namespace tandem::router {
namespace {

http::Response Counted(const RouteDeps& deps, const char* endpoint, http::Response response) {
  if (deps.metrics != nullptr) deps.metrics->CountRequest(endpoint, response.status);
  return response;
}

using Authed = std::function<http::HandlerResult(const http::Request&, const Principal*)>;

// The handler behind the key check: without keys it runs for anyone (principal null); with them
// a request without a valid key gets 401 in the endpoint's envelope and never reaches it.
http::Handler Protected(const RouteDeps& deps, const char* endpoint, ApiStyle style,
                        Authed handler) {
  return [deps, endpoint, style, handler = std::move(handler)](const http::Request& r) {
    if (deps.auth == nullptr) return handler(r, nullptr);
    std::variant<Principal, http::Response> who = deps.auth->Authenticate(r, style);
    if (auto* refused = std::get_if<http::Response>(&who)) {
      return http::HandlerResult(Counted(deps, endpoint, std::move(*refused)));
    }
    return handler(r, &std::get<Principal>(who));
  };
}

absl::Status InstallProbes(http::Router* router, const RouteDeps& deps) {
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/health", [deps](const http::Request&) {
    return http::HandlerResult(Counted(deps, "/health", http::Response::Text(200, "ok\n")));
  }));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/ready", [deps](const http::Request&) {
    if (deps.draining != nullptr && deps.draining->load()) {
      return http::HandlerResult(Counted(deps, "/ready", http::Response::Text(503, "draining\n")));
    }
    const WorkerRegistry::Readiness ready = deps.registry->Ready(deps.served_model);
    http::Response response = ready.ready ? http::Response::Text(200, "ready\n")
                                          : http::Response::Text(503, ready.reason + "\n");
    return http::HandlerResult(Counted(deps, "/ready", std::move(response)));
  }));
  return absl::OkStatus();
}

http::Response MetricsText(const RouteDeps& deps) {
  // Refresh lease state so worker_up is current even when no request asked lately.
  deps.registry->ExpireLeases();
  http::Response response = http::Response::Text(200, deps.metrics_registry->RenderText());
  response.content_type = std::string(metrics::Registry::kContentType);
  return Counted(deps, "/metrics", std::move(response));
}

}  // namespace

absl::Status InstallOperationsRoutes(http::Router* router, const RouteDeps& deps) {
  TANDEM_RETURN_IF_ERROR(InstallProbes(router, deps));
  return router->Handle("GET", "/metrics", [deps](const http::Request&) {
    return http::HandlerResult(MetricsText(deps));
  });
}

absl::Status InstallRoutes(http::Router* router, const RouteDeps& deps) {
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/completions",
                     Protected(deps, "/v1/completions", ApiStyle::kOpenAi,
                               [deps](const http::Request& r, const Principal* p) {
                                 return deps.generation->Handle(r, p);
                               })));
  TANDEM_RETURN_IF_ERROR(router->Handle(
      "POST", "/v1/chat/completions",
      Protected(deps, "/v1/chat/completions", ApiStyle::kOpenAi,
                [deps](const http::Request& r, const Principal* p) {
                  return deps.protocols->Handle(recipe::Protocol::kChatCompletions, r, p);
                })));
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/responses",
                     Protected(deps, "/v1/responses", ApiStyle::kOpenAi,
                               [deps](const http::Request& r, const Principal* p) {
                                 return deps.protocols->Handle(recipe::Protocol::kResponses, r, p);
                               })));
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/messages",
                     Protected(deps, "/v1/messages", ApiStyle::kAnthropic,
                               [deps](const http::Request& r, const Principal* p) {
                                 return deps.protocols->Handle(recipe::Protocol::kMessages, r, p);
                               })));
  TANDEM_RETURN_IF_ERROR(
      router->Handle("POST", "/v1/messages/count_tokens",
                     Protected(deps, "/v1/messages/count_tokens", ApiStyle::kAnthropic,
                               [deps](const http::Request& r, const Principal*) {
                                 return deps.protocols->CountTokens(r);
                               })));
  TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/v1/models", [deps](const http::Request&) {
    nlohmann::json model = {{"id", deps.served_model},
                            {"object", "model"},
                            {"created", deps.created_unix_s},
                            {"owned_by", "tandem"}};
    nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model})}};
    return http::HandlerResult(
        Counted(deps, "/v1/models", http::Response::Json(200, DumpJson(body))));
  }));
  TANDEM_RETURN_IF_ERROR(InstallProbes(router, deps));
  if (deps.serve_metrics) {
    TANDEM_RETURN_IF_ERROR(router->Handle("GET", "/metrics",
                                          Protected(deps, "/metrics", ApiStyle::kOpenAi,
                                                    [deps](const http::Request&, const Principal*) {
                                                      return http::HandlerResult(MetricsText(deps));
                                                    })));
  }
  return absl::OkStatus();
}

}  // namespace tandem::router
