#include "api/endpoints/protocol_api.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/endpoints/image_intake.h"
#include "api/endpoints/protocol_errors.h"
#include "api/generation/recipe_format.h"
#include "api/generation/request_job.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/render.h"
#include "tandem/rpc/conversions.h"
#include "tandem/security/cache_salt.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace tandem::router {
namespace {

using nlohmann::ordered_json;

const char* EndpointPath(recipe::Protocol protocol) {
  switch (protocol) {
    case recipe::Protocol::kChatCompletions:
      return "/v1/chat/completions";
    case recipe::Protocol::kResponses:
      return "/v1/responses";
    case recipe::Protocol::kMessages:
      return "/v1/messages";
  }
  return "unknown";
}

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<recipe::ConversationRequest> Convert(recipe::Protocol protocol,
                                                    const ordered_json& body,
                                                    const recipe::ConversionOptions& options) {
  switch (protocol) {
    case recipe::Protocol::kChatCompletions:
      return recipe::ConvertChatCompletions(body, options);
    case recipe::Protocol::kResponses:
      return recipe::ConvertResponses(body, options);
    case recipe::Protocol::kMessages:
      return recipe::ConvertMessages(body, options);
  }
  return absl::InternalError("unknown protocol");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProtocolApi>> ProtocolApi::Create(Options options, Deps deps) {
  const tokenizer::HfBpeTokenizer* bpe = nullptr;
  if (options.format != ChatFormat::kPlain) {
    bpe = dynamic_cast<const tokenizer::HfBpeTokenizer*>(deps.tokenizer.tokenizer);
    if (bpe == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chat-format ", ChatFormatName(options.format),
                       " needs the model's tokenizer.json (a byte-level BPE tokenizer)"));
    }
  }
  return std::unique_ptr<ProtocolApi>(new ProtocolApi(std::move(options), deps, bpe));
}

ProtocolApi::ProtocolApi(Options options, Deps deps, const tokenizer::HfBpeTokenizer* bpe)
    : options_(std::move(options)), deps_(deps), bpe_(bpe), id_rng_(std::random_device{}()) {
  // Clients name the served model; it renders with the configured format. A plain model has no
  // reasoning mode, so requests default to answering directly.
  conversion_.model_versions_by_name = {{options_.served_model, ModelVersionOf(options_.format)}};
  conversion_.default_thinking_mode = options_.format != ChatFormat::kPlain;
  if (!options_.image_url_hosts.empty()) {
    const image::ImageLimits limits;
    image_fetcher_ = std::make_unique<image::ImageFetcher>(
        image::UrlPolicy{.fetch_enabled = true,
                         .allowed_hosts = options_.image_url_hosts,
                         .max_bytes = limits.max_image_bytes},
        limits.max_url_len);
    const int threads = std::max(1, options_.image_fetch_concurrency);
    fetch_pool_ = std::make_unique<BlockingPool>(threads, static_cast<std::size_t>(threads) * 32);
  }
}

namespace {

// Whether a body may hold an http(s) image URL. A false positive (a URL in the text) only moves
// the request to a fetch thread; a false negative cannot happen: every URL we fetch holds it.
bool MayNameImageUrl(absl::string_view body) {
  for (std::size_t at = body.find("://"); at != absl::string_view::npos;
       at = body.find("://", at + 3)) {
    const absl::string_view before = body.substr(0, at);
    if (absl::EndsWithIgnoreCase(before, "http") || absl::EndsWithIgnoreCase(before, "https")) {
      return true;
    }
  }
  return false;
}

// Hands a handler's answer, computed off the I/O thread, to the deferred response.
void Deliver(http::HandlerResult result, const std::shared_ptr<http::Responder>& responder) {
  if (auto* response = std::get_if<http::Response>(&result)) {
    responder->Respond(std::move(*response));
  } else if (auto* stream = std::get_if<http::SseResponse>(&result)) {
    responder->RespondStream(std::move(*stream));
  } else {
    std::get<http::DeferredResponse>(result).start(responder);
  }
}

}  // namespace

http::HandlerResult ProtocolApi::OffIoThreadIfFetching(
    recipe::Protocol protocol, const std::string& endpoint, const http::Request& request,
    std::function<http::HandlerResult(const http::Request&)> run) {
  if (fetch_pool_ == nullptr || !MayNameImageUrl(request.body)) return run(request);
  auto copy = std::make_shared<const http::Request>(request);
  return http::DeferredResponse{[this, protocol, endpoint, copy,
                                 run = std::move(run)](std::shared_ptr<http::Responder> responder) {
    const bool queued = fetch_pool_->TrySubmit([copy, run, responder] {
      if (responder->cancelled()) return;  // the client left while it waited
      Deliver(run(*copy), responder);
    });
    if (!queued) {
      responder->Respond(Fail(protocol, endpoint,
                              absl::UnavailableError("too many requests with image URLs are being "
                                                     "fetched; retry shortly")));
    }
  }};
}

http::Response ProtocolApi::Fail(recipe::Protocol protocol, const std::string& endpoint,
                                 const absl::Status& status) const {
  http::Response response = ProtocolErrorResponse(protocol, status);
  if (deps_.metrics != nullptr) deps_.metrics->CountRequest(endpoint, response.status);
  return response;
}

std::string ProtocolApi::NewResponseId(recipe::Protocol protocol) {
  std::uint64_t a, b;
  {
    absl::MutexLock lock(&id_mu_);
    a = id_rng_();
    b = id_rng_();
  }
  const char* prefix = protocol == recipe::Protocol::kChatCompletions ? "chatcmpl-"
                       : protocol == recipe::Protocol::kResponses     ? "resp_"
                                                                      : "msg_";
  return absl::StrFormat("%s%016x%016x", prefix, a, b);
}

absl::StatusOr<std::vector<std::int32_t>> ProtocolApi::Encode(
    const recipe::Conversation& conversation) const {
  if (options_.format == ChatFormat::kPlain) {
    const recipe::RenderedPrompt rendered = recipe::RenderPlainConversation(conversation);
    return deps_.tokenizer.tokenizer->Encode(rendered.prompt, /*add_bos=*/true);
  }
  return recipe::EncodePrompt(
      recipe::RenderConversation(conversation, ModelVersionOf(options_.format)), *bpe_);
}

absl::StatusOr<ordered_json> ProtocolApi::ParseBody(absl::string_view body) {
  ordered_json json = ordered_json::parse(body.begin(), body.end(), nullptr,
                                          /*allow_exceptions=*/false);
  if (json.is_discarded()) return recipe::RequestError("the request body is not valid JSON");
  if (!json.is_object()) return recipe::RequestError("the request body must be a JSON object");
  return json;
}

absl::StatusOr<ProtocolApi::Prepared> ProtocolApi::Prepare(recipe::Protocol protocol,
                                                           ordered_json json) const {
  // A request without a model means the served one (as /v1/completions has always accepted).
  if (!json.contains("model")) json["model"] = options_.served_model;
  if (auto model = json.find("model"); model != json.end() && model->is_string() &&
                                       model->get<std::string>() != options_.served_model) {
    return recipe::ConversionFailure(
        404, "invalid_request_error",
        absl::StrCat("the model '", model->get<std::string>(),
                     "' does not exist; this router serves '", options_.served_model, "'"),
        "model", "model_not_found");
  }
  if (protocol == recipe::Protocol::kChatCompletions && json.contains("max_completion_tokens") &&
      !json.contains("max_tokens")) {
    // OpenAI's newer name for the limit. deepseek-recipe reads only max_tokens; clients written
    // for OpenAI send this one and expect it honoured.
    json["max_tokens"] = json["max_completion_tokens"];
  }
  Prepared prepared;
  if (auto salt = json.find("cache_salt"); salt != json.end()) {
    if (!salt->is_null()) {
      if (!salt->is_string() || salt->get_ref<const std::string&>().empty() ||
          salt->get_ref<const std::string&>().size() > 1024) {
        return recipe::ConversionFailure(
            400, "invalid_request_error",
            "'cache_salt' must be a non-empty string of at most 1024 bytes", "cache_salt");
      }
      prepared.cache_salt = salt->get<std::string>();
    }
    json.erase(salt);
  }
  TANDEM_ASSIGN_OR_RETURN(prepared.request, Convert(protocol, json, conversion_));
  recipe::ConversationRequest& request = prepared.request;
  // Image sources exist only for a format that reads images (V4.1): the others render them as
  // text during conversion.
  TANDEM_ASSIGN_OR_RETURN(prepared.images, TakeImages(request.conversation, image::ImageLimits{},
                                                      image_fetcher_.get()));
  if (!prepared.images.empty() && bpe_ == nullptr) {
    return recipe::RequestError("this model does not accept images");
  }
  if (options_.format == ChatFormat::kPlain) {
    // Without a chat format there is no reasoning or tool markup to find in the output.
    request.parsing.thinking_initial_stage.reset();
    request.parsing.parse_tool_calls = false;
    request.parsing.starts_in_tool_calls = false;
  }
  absl::StatusOr<std::vector<std::int32_t>> prompt = Encode(request.conversation);
  if (!prompt.ok()) {
    return recipe::RequestError(
        absl::StrCat("cannot tokenise the prompt: ", prompt.status().message()));
  }
  prepared.prompt = std::move(*prompt);
  if (!prepared.images.empty()) {
    TANDEM_RETURN_IF_ERROR(ExpandImagePlaceholders(bpe_->TokenToId(recipe::kImageToken),
                                                   &prepared.prompt, &prepared.images));
  }
  return prepared;
}

http::HandlerResult ProtocolApi::Handle(recipe::Protocol protocol,
                                        const http::Request& http_request,
                                        const Principal* principal) {
  std::shared_ptr<const Principal> caller =
      principal != nullptr ? std::make_shared<const Principal>(*principal) : nullptr;
  return OffIoThreadIfFetching(protocol, EndpointPath(protocol), http_request,
                               [this, protocol, caller](const http::Request& request) {
                                 return HandleNow(protocol, request, caller.get());
                               });
}

http::HandlerResult ProtocolApi::HandleNow(recipe::Protocol protocol,
                                           const http::Request& http_request,
                                           const Principal* principal) {
  const auto arrived = std::chrono::steady_clock::now();
  const std::string path = EndpointPath(protocol);
  absl::StatusOr<std::string> traffic_class = std::string();
  if (deps_.traffic != nullptr) traffic_class = deps_.traffic->Classify(http_request);
  if (!traffic_class.ok()) {
    return Fail(
        protocol, path,
        recipe::ConversionFailure(400, "invalid_request_error", traffic_class.status().message(),
                                  "X-Tandem-Traffic-Class"));
  }
  if (principal != nullptr && !principal->traffic_class.empty() &&
      !http_request.FindHeader("X-Tandem-Traffic-Class").has_value()) {
    *traffic_class = principal->traffic_class;
  }
  absl::StatusOr<ordered_json> body = ParseBody(http_request.body);
  if (!body.ok()) return Fail(protocol, path, body.status());
  absl::StatusOr<Prepared> prepared = Prepare(protocol, std::move(*body));
  if (!prepared.ok()) return Fail(protocol, path, prepared.status());

  absl::StatusOr<int> max_context = deps_.run.selector->MaxContext(options_.served_model);
  if (!max_context.ok()) return Fail(protocol, path, max_context.status());
  absl::StatusOr<std::int64_t> max_tokens = recipe::ResolveMaxTokens(
      prepared->request, static_cast<std::int64_t>(prepared->prompt.size()), *max_context);
  if (!max_tokens.ok()) return Fail(protocol, path, max_tokens.status());
  std::unique_ptr<TenantLimits::Lease> lease;
  std::vector<http::Header> limit_headers;
  if (principal != nullptr && deps_.limits != nullptr) {
    TenantLimits::Grant grant =
        deps_.limits->Acquire(principal->key_id, principal->key_limits, principal->tenant,
                              static_cast<std::int64_t>(prepared->prompt.size()) + *max_tokens);
    limit_headers = protocol == recipe::Protocol::kMessages
                        ? TenantLimits::AnthropicHeaders(grant.snapshot, absl::Now())
                        : TenantLimits::OpenAiHeaders(grant.snapshot);
    if (grant.lease == nullptr) {
      absl::Status refusal = recipe::ConversionFailure(
          429, "rate_limit_error", grant.refusal.message(), std::nullopt, "rate_limit_exceeded");
      SetRetryAfter(&refusal, std::chrono::seconds(RetryAfterSeconds(grant.refusal)));
      http::Response response = Fail(protocol, path, refusal);
      for (http::Header& h : limit_headers) response.headers.push_back(std::move(h));
      return response;
    }
    lease = std::move(grant.lease);
  }
  auto canceller = std::make_shared<CallCanceller>();
  absl::Status refused;
  std::unique_ptr<AdmissionTicket> ticket = deps_.admission->Admit(canceller, &refused);
  if (ticket == nullptr) {
    http::Response response = Fail(protocol, path, refused);
    for (http::Header& h : limit_headers) response.headers.push_back(std::move(h));
    return response;
  }

  const recipe::InferenceOptions& inference = prepared->request.inference;
  engine::SamplingParams sampling;
  sampling.temperature = static_cast<float>(inference.temperature.value_or(1.0));
  sampling.top_p = static_cast<float>(inference.top_p.value_or(1.0));
  if (inference.seed.has_value()) sampling.seed = *inference.seed;
  sampling.max_tokens = static_cast<int>(*max_tokens);
  if (deps_.tokenizer.llama2c_conventions) {
    sampling.stop_token_ids = {deps_.tokenizer.tokenizer->bos_id()};
    sampling.ignore_eos = true;
  }

  JobSetup setup;
  const std::string response_id = NewResponseId(protocol);
  setup.generation.request_id = response_id;
  setup.generation.prompt_ids = prepared->prompt;
  setup.generation.images = std::move(prepared->images);
  setup.generation.sampling = rpc::ToProto(sampling);
  setup.generation.deadline = std::chrono::system_clock::now() + options_.request_timeout;
  setup.generation.traffic_class = std::move(*traffic_class);
  setup.canceller = std::move(canceller);
  setup.ticket = std::move(ticket);
  setup.arrived = arrived;
  setup.run = deps_.run;
  setup.metrics = deps_.metrics;
  setup.endpoint = path;
  setup.stream = prepared->request.stream;
  setup.limits = std::move(lease);
  setup.response_headers = std::move(limit_headers);
  SaltKvChain(&setup, security::RequestKvHashRoot(options_.isolate_tenant_cache,
                                                  principal != nullptr ? principal->tenant : "",
                                                  prepared->cache_salt));
  std::vector<std::int32_t> stop_ids = sampling.stop_token_ids;
  if (!sampling.ignore_eos) stop_ids.push_back(deps_.tokenizer.tokenizer->eos_id());
  // Stop sequences are the parser's: they apply to answer text only, never to reasoning or markup.
  auto text = std::make_unique<TextStream>(*deps_.tokenizer.tokenizer, prepared->prompt.back(),
                                           std::move(stop_ids), std::vector<std::string>{});
  auto format = std::make_unique<RecipeFormat>(std::move(prepared->request), response_id,
                                               options_.served_model, UnixSeconds(),
                                               std::move(text), prepared->prompt.size());
  return RequestJob::Launch(std::make_shared<RequestJob>(std::move(setup), std::move(format)),
                            deps_.jobs);
}

http::HandlerResult ProtocolApi::CountTokens(const http::Request& http_request) {
  return OffIoThreadIfFetching(
      recipe::Protocol::kMessages, "/v1/messages/count_tokens", http_request,
      [this](const http::Request& request) { return CountTokensNow(request); });
}

http::HandlerResult ProtocolApi::CountTokensNow(const http::Request& http_request) {
  const std::string path = "/v1/messages/count_tokens";
  absl::StatusOr<ordered_json> body = ParseBody(http_request.body);
  if (!body.ok()) return Fail(recipe::Protocol::kMessages, path, body.status());
  // count_tokens takes a Messages request without max_tokens; conversion needs one.
  if (!body->contains("max_tokens")) (*body)["max_tokens"] = 1;
  absl::StatusOr<Prepared> prepared = Prepare(recipe::Protocol::kMessages, std::move(*body));
  if (!prepared.ok()) return Fail(recipe::Protocol::kMessages, path, prepared.status());
  const ordered_json answer = {{"input_tokens", prepared->prompt.size()}};
  if (deps_.metrics != nullptr) deps_.metrics->CountRequest(path, 200);
  return http::HandlerResult(http::Response::Json(200, answer.dump()));
}

}  // namespace tandem::router
