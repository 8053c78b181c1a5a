#pragma once

// A small DeepSeek-style tokenizer for the targets that need one to encode client text: byte-level
// BPE with DeepSeek-V4's pre-tokenizer, a few merges, and every control token the recipe's
// templates write as an added token. Built in code so the targets need no files.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "byte_level.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/render.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace tandem::fuzz {

// GPT-2's stand-in character of a byte (the tokenizer's own alphabet).
inline std::string ByteLevelChar(int b) {
  std::string s;
  tokenizer::internal::AppendByteLevel(std::string(1, static_cast<char>(b)), &s);
  return s;
}

inline nlohmann::json ByteTokenizerJson() {
  using Json = nlohmann::json;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelChar(b)] = b;
  Json merges = Json::array();
  int next = 256;
  for (const char* pair : {"t h", "h e", "th e", "Ġ t", "Ġt he", "i n", "e r"}) {
    const std::string p = pair;
    merges.push_back(p);
    const std::string merged = p.substr(0, p.find(' ')) + p.substr(p.find(' ') + 1);
    if (!vocab.contains(merged)) vocab[merged] = next++;
  }
  Json added = Json::array();
  int id = 1000;
  for (absl::string_view control :
       {recipe::kBosToken, recipe::kEosToken, recipe::kUserToken, recipe::kAssistantToken,
        recipe::kSystemToken, recipe::kLatestReminderToken, recipe::kThinkingStartToken,
        recipe::kThinkingEndToken, recipe::kDsmlToken, recipe::kImageToken}) {
    added.push_back({{"id", id++}, {"content", std::string(control)}, {"special", true},
                     {"lstrip", false}, {"rstrip", false}, {"single_word", false},
                     {"normalized", false}});
  }
  auto split = [](const std::string& re) {
    return Json{{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"},
                {"invert", false}};
  };
  const std::string words =
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
      "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
  Json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"), split(words),
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
          {"pre_tokenizer", pre},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

inline const tokenizer::HfBpeTokenizer& ByteTokenizer() {
  static const tokenizer::HfBpeTokenizer* tok = [] {
    auto loaded = tokenizer::HfBpeTokenizer::FromJson(ByteTokenizerJson().dump(), "fuzz");
    if (!loaded.ok()) {
      std::fprintf(stderr, "fuzz tokenizer: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return loaded->release();
  }();
  return *tok;
}

}  // namespace tandem::fuzz
