// Request -> prompt ids through the protocol layer: parse the Chat Completions JSON, convert,
// render (V4 / V4.1 by model name), encode. Driven by recipe_render_bench.py, which times
// deepseek-recipe on the same requests and prints the ratio.
//
// Usage: tandem_recipe_render_bench TOKENIZER_JSON REQUESTS_JSONL [REPS]
// Prints "requests N", "tokens T" and "tandem_s S" (the best of REPS passes after a warm-up).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/render.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace {

using tandem::recipe::ConversionOptions;

// One pass over every request; returns the number of prompt tokens, or -1 on a failure.
long long Pass(const std::vector<std::string>& requests, const ConversionOptions& options,
               const tandem::tokenizer::HfBpeTokenizer& tokenizer) {
  long long tokens = 0;
  for (const std::string& text : requests) {
    const auto body = nlohmann::ordered_json::parse(text, nullptr, false);
    auto request = tandem::recipe::ConvertChatCompletions(body, options);
    if (!request.ok()) {
      std::fprintf(stderr, "conversion failed: %s\n", std::string(request.status().message()).c_str());
      return -1;
    }
    const auto rendered =
        tandem::recipe::RenderConversation(request->conversation, request->model_version);
    auto ids = tandem::recipe::EncodePrompt(rendered, tokenizer);
    if (!ids.ok()) {
      std::fprintf(stderr, "encoding failed: %s\n", std::string(ids.status().message()).c_str());
      return -1;
    }
    tokens += static_cast<long long>(ids->size());
  }
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON REQUESTS_JSONL [REPS]\n", argv[0]);
    return 2;
  }
  auto tokenizer = tandem::tokenizer::HfBpeTokenizer::Load(argv[1]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> requests;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) requests.push_back(line);
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const ConversionOptions options;
  const long long tokens = Pass(requests, options, **tokenizer);  // warm-up
  if (tokens < 0) return 1;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    if (Pass(requests, options, **tokenizer) != tokens) return 1;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  std::printf("requests %zu\ntokens %lld\ntandem_s %.6f\n", requests.size(), tokens, best);
  return 0;
}
