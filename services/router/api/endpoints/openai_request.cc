#include "api/endpoints/openai_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::router {
namespace {

using nlohmann::json;

// Reads one optional field; null counts as absent. Each returns an error naming the field when
// its type or range is wrong.
class FieldReader {
 public:
  explicit FieldReader(const json& object) : object_(object) {}

  const json* Find(const char* name) const {
    auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<ApiError> Bool(const char* name, bool* out) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) return TypeError(name, "a boolean");
    *out = v->get<bool>();
    return std::nullopt;
  }

  std::optional<ApiError> Int(const char* name, std::int64_t* out, bool* present = nullptr) const {
    const json* v = Find(name);
    if (present != nullptr) *present = v != nullptr;
    if (v == nullptr) return std::nullopt;
    if (v->is_number_unsigned()) {
      if (v->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return ApiError::Invalid(absl::StrCat("'", name, "' is too large"), name);
      }
      *out = static_cast<std::int64_t>(v->get<std::uint64_t>());
    } else if (v->is_number_integer()) {
      *out = v->get<std::int64_t>();
    } else {
      return TypeError(name, "an integer");
    }
    return std::nullopt;
  }

  // A number in [lo, hi]; `lo_open` excludes lo.
  std::optional<ApiError> Number(const char* name, float* out, double lo, double hi,
                                 bool lo_open = false) const {
    const json* v = Find(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) return TypeError(name, "a number");
    const double x = v->get<double>();
    // The range holds for the float the engine gets too: 1e-50 is in (0, 1] but rounds to 0.
    auto within = [&](double y) { return (lo_open ? y > lo : y >= lo) && y <= hi; };
    const bool in_range = std::isfinite(x) && within(x) && within(static_cast<float>(x));
    if (!in_range) {
      return ApiError::Invalid(
          absl::StrCat("'", name, "' must be in ", lo_open ? "(" : "[", lo, ", ", hi, "], got ", x),
          name);
    }
    *out = static_cast<float>(x);
    return std::nullopt;
  }

  static ApiError TypeError(const char* name, const char* expected) {
    return ApiError::Invalid(absl::StrCat("'", name, "' must be ", expected), name);
  }

 private:
  const json& object_;
};

#define TANDEM_API_CHECK(expr)                              \
  do {                                                      \
    if (std::optional<ApiError> e_ = (expr); e_) return e_; \
  } while (0)

std::optional<ApiError> ParsePrompt(const json& body, OpenAiRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return ApiError::Invalid("'prompt' is required", "prompt");
  if (it->is_string()) {
    out->prompt_text = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) {
    return ApiError::Invalid("'prompt' must be a string or an array of token ids", "prompt");
  }
  if (it->empty()) return ApiError::Invalid("'prompt' must not be empty", "prompt");
  // A batch of one text prompt is the same request as the text.
  if (it->size() == 1 && (*it)[0].is_string()) {
    out->prompt_text = (*it)[0].get<std::string>();
    return std::nullopt;
  }
  for (const json& id : *it) {
    if (!id.is_number_integer() && !id.is_number_unsigned()) {
      return ApiError::Invalid(
          "'prompt' must be a string or an array of token ids (batches of prompts are not "
          "supported)",
          "prompt");
    }
    const std::int64_t v = id.get<std::int64_t>();
    if (v < 0 || v > std::numeric_limits<std::int32_t>::max()) {
      return ApiError::Invalid(absl::StrCat("'prompt' token id ", v, " is out of range"), "prompt");
    }
    out->prompt_ids.push_back(static_cast<std::int32_t>(v));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const FieldReader& f, OpenAiRequest* out) {
  const json* stop = f.Find("stop");
  if (stop == nullptr) return std::nullopt;
  if (stop->is_string()) {
    out->stop.push_back(stop->get<std::string>());
    return std::nullopt;
  }
  if (!stop->is_array()) return FieldReader::TypeError("stop", "a string or an array of strings");
  for (const json& s : *stop) {
    if (!s.is_string()) return FieldReader::TypeError("stop", "a string or an array of strings");
    out->stop.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> ParseUnsupported(const FieldReader& f) {
  std::int64_t n = 1;
  TANDEM_API_CHECK(f.Int("n", &n));
  if (n != 1) return ApiError::Invalid("only n = 1 is supported", "n");
  bool echo = false;
  TANDEM_API_CHECK(f.Bool("echo", &echo));
  if (echo) return ApiError::Invalid("echo is not supported", "echo");
  if (f.Find("logprobs") != nullptr) {
    return ApiError::Invalid("logprobs are not supported", "logprobs");
  }
  if (const json* user = f.Find("user"); user != nullptr && !user->is_string()) {
    return FieldReader::TypeError("user", "a string");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseSampling(const FieldReader& f, OpenAiRequest* out) {
  TANDEM_API_CHECK(f.Number("temperature", &out->sampling.temperature, 0.0, 2.0));
  TANDEM_API_CHECK(f.Number("top_p", &out->sampling.top_p, 0.0, 1.0, /*lo_open=*/true));
  TANDEM_API_CHECK(f.Number("min_p", &out->sampling.min_p, 0.0, 1.0));
  TANDEM_API_CHECK(f.Number("presence_penalty", &out->sampling.presence_penalty, -2.0, 2.0));
  TANDEM_API_CHECK(f.Number("frequency_penalty", &out->sampling.frequency_penalty, -2.0, 2.0));
  TANDEM_API_CHECK(f.Number("repetition_penalty", &out->sampling.repetition_penalty, 0.0, 10.0,
                            /*lo_open=*/true));
  std::int64_t top_k = 0;
  TANDEM_API_CHECK(f.Int("top_k", &top_k));
  if (top_k < -1 || top_k > std::numeric_limits<std::int32_t>::max()) {
    return ApiError::Invalid("'top_k' must be -1 or 0 (off) or a positive integer", "top_k");
  }
  out->sampling.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  bool has_seed = false;
  std::int64_t seed = 0;
  TANDEM_API_CHECK(f.Int("seed", &seed, &has_seed));
  if (has_seed) out->sampling.seed = static_cast<std::uint64_t>(seed);

  bool present = false;
  std::int64_t max_tokens = 0;
  TANDEM_API_CHECK(f.Int("max_tokens", &max_tokens, &present));
  if (present) {
    if (max_tokens < 1 || max_tokens > std::numeric_limits<std::int32_t>::max()) {
      return ApiError::Invalid("'max_tokens' must be at least 1", "max_tokens");
    }
    out->max_tokens = static_cast<int>(max_tokens);
  }
  return ParseStop(f, out);
}

}  // namespace

std::optional<ApiError> ParseOpenAiRequest(absl::string_view body, OpenAiRequest* out) {
  *out = OpenAiRequest{};
  const json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return ApiError::Invalid("the request body is not valid JSON");
  if (!parsed.is_object()) return ApiError::Invalid("the request body must be a JSON object");
  const FieldReader f(parsed);

  if (const json* model = f.Find("model"); model != nullptr) {
    if (!model->is_string()) return FieldReader::TypeError("model", "a string");
    out->model = model->get<std::string>();
  }
  TANDEM_API_CHECK(ParsePrompt(parsed, out));
  TANDEM_API_CHECK(ParseUnsupported(f));
  TANDEM_API_CHECK(ParseSampling(f, out));
  TANDEM_API_CHECK(f.Bool("stream", &out->stream));
  TANDEM_API_CHECK(f.Bool("return_token_ids", &out->return_token_ids));
  TANDEM_API_CHECK(ParseCacheSalt(f.Find("cache_salt"), &out->cache_salt));
  if (const json* options = f.Find("stream_options"); options != nullptr) {
    if (!options->is_object()) return FieldReader::TypeError("stream_options", "an object");
    TANDEM_API_CHECK(FieldReader(*options).Bool("include_usage", &out->include_usage));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseCacheSalt(const nlohmann::json* value, std::string* out) {
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_string()) return FieldReader::TypeError("cache_salt", "a string");
  const std::string& salt = value->get_ref<const std::string&>();
  if (salt.empty() || salt.size() > 1024) {
    return ApiError::Invalid("'cache_salt' must be a non-empty string of at most 1024 bytes",
                             "cache_salt");
  }
  *out = salt;
  return std::nullopt;
}

}  // namespace tandem::router
