#include "api/endpoints/generation_api.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/generation/completions_format.h"
#include "api/generation/request_job.h"
#include "tandem/rpc/conversions.h"
#include "tandem/security/cache_salt.h"

namespace tandem::router {
namespace {

constexpr char kPath[] = "/v1/completions";

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

GenerationApi::GenerationApi(Options options, Deps deps)
    : options_(std::move(options)), deps_(deps), id_rng_(std::random_device{}()) {}

http::Response GenerationApi::Fail(const std::string& endpoint, const ApiError& error) const {
  if (deps_.metrics != nullptr) deps_.metrics->CountRequest(endpoint, error.http_status);
  return error.ToResponse();
}

std::string GenerationApi::NewRequestId() {
  std::uint64_t a, b;
  {
    absl::MutexLock lock(&id_mu_);
    a = id_rng_();
    b = id_rng_();
  }
  return absl::StrFormat("cmpl-%016x%016x", a, b);
}

std::optional<ApiError> GenerationApi::PromptIds(const OpenAiRequest& request,
                                                 std::vector<std::int32_t>* ids) const {
  const tokenizer::Tokenizer& tok = *deps_.tokenizer.tokenizer;
  const std::string param = "prompt";
  std::string text;
  if (request.prompt_text.has_value()) {
    text = *request.prompt_text;
  } else {
    for (std::int32_t id : request.prompt_ids) {
      if (id >= tok.vocab_size()) {
        return ApiError::Invalid(absl::StrCat("'prompt' token id ", id,
                                              " is outside the vocabulary of ", tok.vocab_size()),
                                 param);
      }
    }
    *ids = request.prompt_ids;
    return std::nullopt;
  }
  absl::StatusOr<std::vector<std::int32_t>> encoded = tok.Encode(text, /*add_bos=*/true);
  if (!encoded.ok()) {
    return ApiError::Invalid(
        absl::StrCat("cannot tokenise the prompt: ", encoded.status().message()), param);
  }
  *ids = std::move(*encoded);
  return std::nullopt;
}

v1::SamplingParams GenerationApi::Sampling(const OpenAiRequest& r, int max_tokens) const {
  engine::SamplingParams p = r.sampling;
  p.max_tokens = max_tokens;
  if (deps_.tokenizer.llama2c_conventions) {
    p.stop_token_ids = {deps_.tokenizer.tokenizer->bos_id()};
    p.ignore_eos = true;
  }
  return rpc::ToProto(p);
}

http::HandlerResult GenerationApi::Handle(const http::Request& http_request,
                                          const Principal* principal) {
  const auto arrived = std::chrono::steady_clock::now();
  const std::string path = kPath;
  OpenAiRequest request;
  if (auto error = ParseOpenAiRequest(http_request.body, &request)) {
    return Fail(path, *error);
  }
  std::string traffic_class;
  if (deps_.traffic != nullptr) {
    absl::StatusOr<std::string> cls = deps_.traffic->Classify(http_request);
    if (!cls.ok()) {
      return Fail(path,
                  ApiError::Invalid(std::string(cls.status().message()), "X-Tandem-Traffic-Class"));
    }
    traffic_class = std::move(*cls);
  }
  if (principal != nullptr && !principal->traffic_class.empty() &&
      !http_request.FindHeader("X-Tandem-Traffic-Class").has_value()) {
    traffic_class = principal->traffic_class;
  }
  if (!request.model.empty() && request.model != options_.served_model) {
    ApiError error = ApiError::Invalid(
        absl::StrCat("the model '", request.model, "' does not exist; this router serves '",
                     options_.served_model, "'"),
        "model");
    error.http_status = 404;
    error.code = "model_not_found";
    return Fail(path, error);
  }
  std::vector<std::int32_t> prompt;
  if (auto error = PromptIds(request, &prompt)) return Fail(path, *error);

  absl::StatusOr<int> max_context = deps_.run.selector->MaxContext(options_.served_model);
  if (!max_context.ok()) return Fail(path, ApiError::FromStatus(max_context.status()));
  std::int64_t max_tokens = 0;
  if (auto error =
          MaxTokens(request, static_cast<std::int64_t>(prompt.size()), *max_context, &max_tokens)) {
    return Fail(path, *error);
  }
  std::unique_ptr<TenantLimits::Lease> lease;
  std::vector<http::Header> limit_headers;
  if (principal != nullptr && deps_.limits != nullptr) {
    TenantLimits::Grant grant =
        deps_.limits->Acquire(principal->key_id, principal->key_limits, principal->tenant,
                              static_cast<std::int64_t>(prompt.size()) + max_tokens);
    limit_headers = TenantLimits::OpenAiHeaders(grant.snapshot);
    if (grant.lease == nullptr) {
      ApiError error = ApiError::FromStatus(grant.refusal);
      error.code = "rate_limit_exceeded";
      http::Response response = Fail(path, error);
      for (http::Header& h : limit_headers) response.headers.push_back(std::move(h));
      return response;
    }
    lease = std::move(grant.lease);
  }
  auto canceller = std::make_shared<CallCanceller>();
  absl::Status refused;
  std::unique_ptr<AdmissionTicket> ticket = deps_.admission->Admit(canceller, &refused);
  if (ticket == nullptr) {
    http::Response response = Fail(path, ApiError::FromStatus(refused));
    for (http::Header& h : limit_headers) response.headers.push_back(std::move(h));
    return response;
  }

  ResponseContext response;
  response.id = NewRequestId();
  response.created = UnixSeconds();
  response.model = options_.served_model;
  response.return_token_ids = request.return_token_ids;
  response.prompt_ids = prompt;
  JobSetup setup;
  setup.generation.request_id = response.id;
  setup.generation.prompt_ids = prompt;
  setup.generation.sampling = Sampling(request, static_cast<int>(max_tokens));
  setup.generation.deadline = std::chrono::system_clock::now() + options_.request_timeout;
  setup.generation.traffic_class = std::move(traffic_class);
  setup.canceller = std::move(canceller);
  setup.ticket = std::move(ticket);
  setup.arrived = arrived;
  setup.run = deps_.run;
  setup.metrics = deps_.metrics;
  setup.endpoint = path;
  setup.stream = request.stream;
  setup.limits = std::move(lease);
  setup.response_headers = std::move(limit_headers);
  SaltKvChain(&setup, security::RequestKvHashRoot(options_.isolate_tenant_cache,
                                                  principal != nullptr ? principal->tenant : "",
                                                  request.cache_salt));
  std::vector<std::int32_t> stop_ids(setup.generation.sampling.stop_token_ids().begin(),
                                     setup.generation.sampling.stop_token_ids().end());
  if (!setup.generation.sampling.ignore_eos()) {
    stop_ids.push_back(deps_.tokenizer.tokenizer->eos_id());
  }
  auto format = std::make_unique<CompletionsFormat>(
      std::move(response),
      std::make_unique<TextStream>(*deps_.tokenizer.tokenizer, prompt.back(), std::move(stop_ids),
                                   request.stop),
      request.stream, request.include_usage);
  return RequestJob::Launch(std::make_shared<RequestJob>(std::move(setup), std::move(format)),
                            deps_.jobs);
}

std::optional<ApiError> GenerationApi::MaxTokens(const OpenAiRequest& request,
                                                 std::int64_t prompt_len, std::int64_t max_context,
                                                 std::int64_t* max_tokens) const {
  if (prompt_len >= max_context) {
    return ApiError::Invalid(
        absl::StrCat("the prompt has ", prompt_len, " tokens; the model's context is ", max_context,
                     " tokens"),
        "prompt");
  }
  *max_tokens = request.max_tokens.value_or(16);  // OpenAI's default for completions
  if (prompt_len + *max_tokens > max_context) {
    return ApiError::Invalid(
        absl::StrCat("the prompt (", prompt_len, " tokens) plus max_tokens (", *max_tokens,
                     ") exceeds the model's context of ", max_context, " tokens"),
        "max_tokens");
  }
  return std::nullopt;
}

}  // namespace tandem::router
