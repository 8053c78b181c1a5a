#include "tandem/tokenizer/llama2c_tokenizer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tandem/tokenizer/incremental_decoder.h"

namespace tandem::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::filesystem::path kSharedDir = TANDEM_SHARED_DIR;

std::filesystem::path TokenizerPath() {
  return kSharedDir / "models" / "stories260K" / "tokenizer.bin";
}

class Stories260KTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(TokenizerPath())) {
      GTEST_SKIP() << "shared data not found at " << TokenizerPath()
                   << " (set TANDEM_SHARED_DIR to the directory holding models/)";
    }
    auto tok = Llama2cTokenizer::Load(TokenizerPath().string(), 512);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = *std::move(tok);
  }

  std::vector<std::int32_t> Encode(const std::string& text, bool add_bos = true) {
    auto ids = tok_->Encode(text, add_bos);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<std::int32_t>{};
  }

  std::string RoundTrip(const std::string& text) {
    auto decoded = tok_->Decode(Encode(text));
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return decoded.ok() ? *decoded : "<error>";
  }

  std::unique_ptr<Llama2cTokenizer> tok_;
};

std::vector<nlohmann::json> ReadFixture() {
  std::vector<nlohmann::json> lines;
  std::ifstream in(kSharedDir / "fixtures" / "stories260K_greedy.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

TEST_F(Stories260KTokenizerTest, EncodesEveryFixturePromptLikeTheReference) {
  const auto lines = ReadFixture();
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) {
    const std::string prompt = line["prompt"];
    const auto expected = line["prompt_ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(Encode(prompt), expected) << "prompt: " << prompt;
  }
}

TEST_F(Stories260KTokenizerTest, DecodesEveryFixtureToTheReferenceText) {
  for (const auto& line : ReadFixture()) {
    auto ids = line["prompt_ids"].get<std::vector<std::int32_t>>();
    const auto out = line["output_ids"].get<std::vector<std::int32_t>>();
    ids.insert(ids.end(), out.begin(), out.end());
    auto text = tok_->Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, line["text"].get<std::string>());
  }
}

TEST_F(Stories260KTokenizerTest, DummyPrefixMakesTheFirstWordASpacedPiece) {
  const auto ids = Encode("Once", /*add_bos=*/false);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(tok_->piece(ids[0]), " Once");
  EXPECT_THAT(Encode(""), ElementsAre(Llama2cTokenizer::kBos));
  EXPECT_TRUE(Encode("", /*add_bos=*/false).empty());
}

TEST_F(Stories260KTokenizerTest, WithoutBosTheDummySpaceStaysInTheText) {
  auto text = tok_->Decode(Encode("Hi there", /*add_bos=*/false));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, " Hi there");
}

TEST_F(Stories260KTokenizerTest, RoundTripsAscii) {
  for (const std::string text :
       {"Once upon a time, there was a dog.", "  two leading spaces", "tabs\tand\nnewlines\n",
        "Numbers 12345 and symbols #$%^&*()[]{}", "x", " ", "ALL CAPS SHOUTING!!!"}) {
    EXPECT_EQ(RoundTrip(text), text);
  }
}

TEST_F(Stories260KTokenizerTest, RoundTripsUnicodeThroughByteFallback) {
  for (const std::string text : {"héllo wörld", "日本語のテキスト", "emoji 🙂🚀 mixed", "Ωmega ∑ ≠ ∞",
                                 "café\u00A0crème"}) {
    const auto ids = Encode(text);
    EXPECT_EQ(RoundTrip(text), text);
    // Characters absent from this small vocab must have gone through byte-fallback tokens.
    bool saw_byte_token = false;
    for (auto id : ids) saw_byte_token |= id >= 3 && id < 3 + 256;
    EXPECT_TRUE(saw_byte_token) << text;
  }
}

TEST_F(Stories260KTokenizerTest, UnknownCharacterBecomesItsUtf8BytesPlusThree) {
  // U+1F642 is F0 9F 99 82.
  const auto ids = Encode("\xF0\x9F\x99\x82", /*add_bos=*/false);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_THAT(std::vector<std::int32_t>(ids.end() - 4, ids.end()),
              ElementsAre(0xF0 + 3, 0x9F + 3, 0x99 + 3, 0x82 + 3));
}

TEST_F(Stories260KTokenizerTest, RoundTripsInvalidUtf8Bytes) {
  const std::string text = "a\xFF\xC3 b\x80";
  EXPECT_EQ(RoundTrip(text), text);
}

TEST_F(Stories260KTokenizerTest, IncrementalDecoderNeverSplitsACharacter) {
  const std::string text = "Lily saw 日本 and 🙂!";
  const auto ids = Encode(text);
  IncrementalDecoder dec(*tok_, ids.front());
  std::string streamed;
  bool held_back = false;
  for (std::size_t i = 1; i < ids.size(); ++i) {
    auto part = dec.Push(ids[i]);
    ASSERT_TRUE(part.ok()) << part.status();
    held_back |= part->empty() && dec.pending_bytes() > 0;
    // Each emitted chunk must be whole characters: it may not end inside one.
    if (!part->empty()) {
      std::size_t last_lead = part->size() - 1;
      while (last_lead > 0 && (static_cast<unsigned char>((*part)[last_lead]) & 0xC0) == 0x80) {
        --last_lead;
      }
      const auto lead = static_cast<unsigned char>((*part)[last_lead]);
      const std::size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      EXPECT_EQ(part->size() - last_lead, len) << "chunk ends inside a character";
    }
    streamed += *part;
  }
  streamed += dec.Flush();
  EXPECT_TRUE(held_back) << "multi-byte characters should have been held back at least once";
  EXPECT_EQ(streamed, text);
}

TEST_F(Stories260KTokenizerTest, IncrementalDecoderReplacesBrokenCharacters) {
  IncrementalDecoder dec(*tok_, Llama2cTokenizer::kBos);
  auto first = dec.Push(3 + 0xE6);  // lead byte of a 3-byte character
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
  auto second = dec.Push(3 + 'a');  // cannot continue it
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, "\xEF\xBF\xBD" "a");
  auto lone = dec.Push(3 + 0xE6);
  ASSERT_TRUE(lone.ok());
  EXPECT_EQ(*lone, "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.pending_bytes(), 0u);
}

TEST_F(Stories260KTokenizerTest, RejectsOutOfRangeIds) {
  EXPECT_FALSE(tok_->DecodeToken(Tokenizer::kNoToken, 512).ok());
  EXPECT_FALSE(tok_->DecodeToken(Tokenizer::kNoToken, -1).ok());
  const std::vector<std::int32_t> ids = {1, 400, 9999};
  EXPECT_THAT(tok_->Decode(ids).status().message(), HasSubstr("9999"));
}

// The greedy merge rule written the obvious quadratic way: rescan all adjacent pairs, take the
// first one with the strictly best score.
std::vector<std::int32_t> QuadraticMerge(const Llama2cTokenizer& tok,
                                         std::vector<std::int32_t> ids) {
  std::map<std::string, std::int32_t> lookup;
  for (int i = tok.vocab_size() - 1; i >= 0; --i) lookup[tok.piece(i)] = i;
  while (true) {
    float best = -1e30f;
    int best_at = -1;
    std::int32_t best_id = -1;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = lookup.find(tok.piece(ids[i]) + tok.piece(ids[i + 1]));
      if (it != lookup.end() && tok.score(it->second) > best) {
        best = tok.score(it->second);
        best_at = static_cast<int>(i);
        best_id = it->second;
      }
    }
    if (best_at < 0) return ids;
    ids[best_at] = best_id;
    ids.erase(ids.begin() + best_at + 1);
  }
}

TEST_F(Stories260KTokenizerTest, MergesLikeTheQuadraticRuleOnRandomText) {
  std::map<std::string, std::int32_t> lookup;
  for (int i = tok_->vocab_size() - 1; i >= 0; --i) lookup[tok_->piece(i)] = i;
  // Before merging, each character is its vocab piece or, failing that, its bytes.
  auto symbols_of = [&](const std::string& character, std::vector<std::int32_t>* out) {
    auto it = lookup.find(character);
    if (it != lookup.end()) {
      out->push_back(it->second);
    } else {
      for (unsigned char c : character) out->push_back(Llama2cTokenizer::kFirstByteToken + c);
    }
  };
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "e", "t", "h", " ", " ", "o", "n", "s", "d",
                                             ".", "L", "y", "\xC3\xA9", "\n", "i", "l", "r"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    std::vector<std::int32_t> symbols;
    symbols_of(" ", &symbols);
    const int len = 1 + static_cast<int>(rng() % 80);
    for (int i = 0; i < len; ++i) {
      const std::string& character = alphabet[rng() % alphabet.size()];
      text += character;
      symbols_of(character, &symbols);
    }
    EXPECT_EQ(Encode(text, false), QuadraticMerge(*tok_, symbols)) << "text: " << text;
  }
}

}  // namespace
}  // namespace tandem::tokenizer
