// Malformed or unsupported tokenizer.json files fail to load with an error naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"
#include "tandem/tokenizer/model_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json Minimal() {
  return {{"added_tokens", Json::array()},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false},
                             {"use_regex", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}},
                     {"merges", {"a b"}}}}};
}

std::string LoadError(const Json& j) {
  auto tok = HfBpeTokenizer::FromJson(j.dump(), "t.json");
  return tok.ok() ? std::string("loaded") : std::string(tok.status().message());
}

TEST(HfTokenizerJsonErrorsTest, MinimalLoads) {
  EXPECT_EQ(LoadError(Minimal()), "loaded");
}

TEST(HfTokenizerJsonErrorsTest, NotJson) {
  auto tok = HfBpeTokenizer::FromJson("{\"model\": ", "broken.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("broken.json is not valid JSON"));
}

TEST(HfTokenizerJsonErrorsTest, ModelFields) {
  Json j = Minimal();
  j.erase("model");
  EXPECT_THAT(LoadError(j), HasSubstr("model: missing"));
  j = Minimal();
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(LoadError(j), HasSubstr("model.type: 'WordPiece' is not BPE"));
  j = Minimal();
  j["model"]["vocab"]["c"] = 1;
  EXPECT_THAT(LoadError(j), HasSubstr("model.vocab['c']: id 1 is also used by 'b'"));
  j = Minimal();
  j["model"]["vocab"]["c"] = "3";
  EXPECT_THAT(LoadError(j), HasSubstr("model.vocab['c']: expected an integer id"));
  j = Minimal();
  j["model"]["merges"] = {"a b", "b c"};
  EXPECT_THAT(LoadError(j), HasSubstr("model.merges[1]: token 'c' is not in the vocab"));
  j = Minimal();
  j["model"]["merges"] = {"a b", "b a"};
  EXPECT_THAT(LoadError(j), HasSubstr("model.merges[1]: token 'ba' is not in the vocab"));
  j = Minimal();
  j["model"]["merges"] = {"ab"};
  EXPECT_THAT(LoadError(j), HasSubstr("model.merges[0]"));
  j = Minimal();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_THAT(LoadError(j), HasSubstr("model.unk_token: '<unk>' is not in the vocab"));
  j = Minimal();
  j["model"]["dropout"] = 0.1;
  EXPECT_THAT(LoadError(j), HasSubstr("model.dropout"));
}

TEST(HfTokenizerJsonErrorsTest, UnsupportedComponentsAreNamed) {
  Json j = Minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}},
                        {"behavior", "Isolated"}, {"invert", false}};
  EXPECT_THAT(LoadError(j), HasSubstr("pre_tokenizer.pattern.Regex: regex '\\w+' has no matcher"));
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_THAT(LoadError(j), HasSubstr("pre_tokenizer.type: unsupported pre-tokenizer 'Metaspace'"));
  j = Minimal();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}};
  EXPECT_THAT(LoadError(j), HasSubstr("pre_tokenizer.behavior: unknown behavior 'Sideways'"));
  j = Minimal();
  j["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THAT(LoadError(j), HasSubstr("normalizer.type: unsupported normalizer 'NFKC'"));
  j = Minimal();
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}}}};
  EXPECT_THAT(LoadError(j), HasSubstr("decoder.decoders[0].type: unsupported decoder 'Fuse'"));
  j = Minimal();
  j.erase("decoder");
  EXPECT_THAT(LoadError(j), HasSubstr("decoder"));
}

TEST(HfTokenizerJsonErrorsTest, AddedTokenFields) {
  Json j = Minimal();
  j["added_tokens"] = {{{"id", 5}}};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[0].content: missing"));
  j["added_tokens"] = {{{"id", -1}, {"content", "<x>"}}};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[0].id"));
  j["added_tokens"] = {{{"id", 5}, {"content", "<x>"}, {"special", "yes"}}};
  EXPECT_THAT(LoadError(j), HasSubstr("added_tokens[0].special: expected true or false"));
}

TEST(HfTokenizerJsonErrorsTest, LoadModelTokenizerFindsTokenizerJson) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "hf_model_tokenizer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << Minimal().dump();
  auto loaded = LoadModelTokenizer(dir.string(), /*vocab_size=*/3);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->llama2c_conventions);
  auto ids = loaded->tokenizer->Encode("ab", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, std::vector<std::int32_t>{2});
  // A tokenizer with ids past the model's embedding table is refused.
  auto too_small = LoadModelTokenizer(dir.string(), /*vocab_size=*/2);
  EXPECT_THAT(too_small.status().message(), HasSubstr("model's vocabulary has 2 entries"));
  EXPECT_EQ(HfBpeTokenizer::Load((dir / "missing.json").string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::tokenizer
