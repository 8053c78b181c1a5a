// EncodePrompt: control ranges become their ids, everything else is plain text, on a tokenizer.json
// written here: one token per printable ASCII character (id = its code), no merges, the control
// tokens added at 1000+.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tandem/recipe/render.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kControls = {
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<think>", "</think>"};

std::unique_ptr<tokenizer::HfBpeTokenizer> ByteTokenizer(bool with_controls) {
  Json vocab = Json::object();
  for (int c = 0x20; c < 0x7F; ++c) vocab[std::string(1, static_cast<char>(c))] = c;
  Json added = Json::array();
  if (with_controls) {
    for (std::size_t i = 0; i < kControls.size(); ++i) {
      added.push_back({{"id", 1000 + i}, {"content", kControls[i]}, {"special", true},
                       {"lstrip", false}, {"rstrip", false}, {"single_word", false},
                       {"normalized", false}});
    }
  }
  Json j = {{"version", "1.0"},
            {"added_tokens", added},
            {"decoder", {{"type", "Sequence"}, {"decoders", Json::array()}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}}};
  auto tok = tokenizer::HfBpeTokenizer::FromJson(j.dump(), "bytes");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::vector<std::int32_t> Bytes(const std::string& s) {
  return std::vector<std::int32_t>(s.begin(), s.end());
}

TEST(EncodePromptTest, ControlRangesBecomeIdsAndUserTextStaysBytes) {
  auto tok = ByteTokenizer(true);
  ASSERT_NE(tok, nullptr);
  Conversation c;
  c.thinking_mode = false;
  Message m;
  m.content = "hi<think>";  // a forged control spelling
  c.messages = {m};
  auto ids = EncodePrompt(RenderConversation(c, ModelVersion::kDeepseekV4), *tok);
  ASSERT_TRUE(ids.ok()) << ids.status();
  std::vector<std::int32_t> want = {1000, 1002};  // BOS, <｜User｜>
  for (unsigned char ch : std::string("hi<think>")) want.push_back(ch);
  want.push_back(1003);  // <｜Assistant｜>
  want.push_back(1005);  // </think>
  EXPECT_EQ(*ids, want);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 1004), 0) << "the typed <think> became a control";
}

TEST(EncodePromptTest, MissingControlTokenIsAnError) {
  auto tok = ByteTokenizer(false);
  ASSERT_NE(tok, nullptr);
  RenderedPrompt r;
  r.prompt = "<｜User｜>x";
  r.special_ranges = {{0, std::string("<｜User｜>").size()}};
  auto ids = EncodePrompt(r, *tok);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()), ::testing::HasSubstr("<｜User｜>"));
}

TEST(EncodePromptTest, RangesOutsideThePromptAreRejected) {
  auto tok = ByteTokenizer(true);
  RenderedPrompt r;
  r.prompt = "ab";
  r.special_ranges = {{1, 5}};
  EXPECT_FALSE(EncodePrompt(r, *tok).ok());
  r.special_ranges = {};
  auto ids = EncodePrompt(r, *tok);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, Bytes("ab"));
}

}  // namespace
}  // namespace tandem::recipe
