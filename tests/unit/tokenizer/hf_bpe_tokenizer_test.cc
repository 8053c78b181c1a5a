// HfBpeTokenizer on small tokenizer.json files written here (no Python needed). Expected ids follow
// from the BPE rules by hand: rank order, leftmost on ties, the DeepSeek pre-tokenizer's pieces.
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tandem/tokenizer/incremental_decoder.h"

namespace tandem::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// GPT-2's stand-in character for a byte, written out from its definition.
std::string ByteChar(int b) {
  char32_t c;
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
    c = b;
  } else {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    }
    c = 0x100 + n;
  }
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

constexpr const char* kDeepSeekWords =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

// Byte-level tokenizer: ids 0-255 are the bytes in order, then one id per merge result, then the
// added tokens. DeepSeek-V4's pre-tokenizer and decoder.
struct Fixture {
  Json vocab = Json::object();
  Json merges = Json::array();
  Json added = Json::array();
  Json pre_tokenizer;
  int next_id = 256;

  Fixture() {
    for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
    auto split = [](const std::string& re) {
      return Json{{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"},
                  {"invert", false}};
    };
    pre_tokenizer = {{"type", "Sequence"},
                     {"pretokenizers",
                      {split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"), split(kDeepSeekWords),
                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  }
  // Adds merge `a b` (byte-level spellings) and returns the merged token's id.
  int Merge(const std::string& a, const std::string& b) {
    merges.push_back(a + " " + b);
    if (!vocab.contains(a + b)) vocab[a + b] = next_id++;
    return vocab[a + b].get<int>();
  }
  void Added(int id, const std::string& content, bool special) {
    added.push_back({{"id", id}, {"content", content}, {"special", special}, {"lstrip", false},
                     {"rstrip", false}, {"single_word", false}, {"normalized", !special}});
  }
  Json ToJson() const {
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
            {"pre_tokenizer", pre_tokenizer},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", false}}}};
  }
  std::unique_ptr<HfBpeTokenizer> Load() const {
    auto tok = HfBpeTokenizer::FromJson(ToJson().dump(), "test");
    EXPECT_TRUE(tok.ok()) << tok.status();
    return tok.ok() ? std::move(*tok) : nullptr;
  }
};

std::vector<std::int32_t> Enc(const HfBpeTokenizer& tok, const std::string& text) {
  auto ids = tok.Encode(text, false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<std::int32_t>{};
}

TEST(HfBpeTokenizerTest, BytesMapThroughTheByteLevelAlphabet) {
  auto tok = Fixture().Load();
  // Without merges every UTF-8 byte is its own token, whatever its stand-in character.
  EXPECT_THAT(Enc(*tok, "é"), ElementsAre(0xC3, 0xA9));
  EXPECT_THAT(Enc(*tok, "a\nb"), ElementsAre('a', '\n', 'b'));
  EXPECT_THAT(Enc(*tok, "\x01 \x7f"), ElementsAre(0x01, ' ', 0x7F));
  EXPECT_EQ(tok->IdToToken(' '), "Ġ");
  EXPECT_EQ(tok->IdToToken('\n'), "Ċ");
}

TEST(HfBpeTokenizerTest, MergesApplyInRankOrder) {
  Fixture bc_first;
  const int bc = bc_first.Merge("b", "c");
  bc_first.Merge("a", "b");
  EXPECT_THAT(Enc(*bc_first.Load(), "abc"), ElementsAre('a', bc));

  Fixture ab_first;
  const int ab = ab_first.Merge("a", "b");
  ab_first.Merge("b", "c");
  EXPECT_THAT(Enc(*ab_first.Load(), "abc"), ElementsAre(ab, 'c'));
}

TEST(HfBpeTokenizerTest, EqualRanksMergeLeftmostFirstAndChain) {
  Fixture f;
  const int aa = f.Merge("a", "a");
  const int aaaa = f.Merge("aa", "aa");
  EXPECT_THAT(Enc(*f.Load(), "aaa"), ElementsAre(aa, 'a'));
  EXPECT_THAT(Enc(*f.Load(), "aaaaa"), ElementsAre(aaaa, 'a'));
}

TEST(HfBpeTokenizerTest, LongWordsMergeLikeShortOnes) {
  // Past the short-word path (48 symbols) the heap must give the same result.
  Fixture f;
  const int ab = f.Merge("a", "b");
  const int abab = f.Merge("ab", "ab");
  std::string text;
  for (int i = 0; i < 50; ++i) text += "ab";
  text += "a";
  const auto ids = Enc(*f.Load(), text);
  std::vector<std::int32_t> want(25, abab);
  want.push_back('a');
  EXPECT_EQ(ids, want);
  EXPECT_NE(ab, abab);
}

TEST(HfBpeTokenizerTest, PairFormMergesEqualStringForm) {
  Fixture f;
  const int he = f.Merge("h", "e");
  Json j = f.ToJson();
  j["model"]["merges"] = Json::array({Json::array({"h", "e"})});
  auto tok = HfBpeTokenizer::FromJson(j.dump(), "pairs");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(Enc(**tok, "he"), ElementsAre(he));
}

TEST(HfBpeTokenizerTest, DeepSeekPiecesBoundMerges) {
  Fixture f;
  const int three_four = f.Merge("3", "4");  // would win if the digits were one piece
  const int twelve = f.Merge("1", "2");
  const int t123 = f.Merge("12", "3");
  const int t45 = f.Merge("4", "5");
  const int sp_w = f.Merge("Ġ", "w");
  const int sp_sp = f.Merge("Ġ", "Ġ");
  auto tok = f.Load();
  EXPECT_NE(three_four, t45);
  EXPECT_THAT(Enc(*tok, "12345"), ElementsAre(t123, t45));
  // " w" is one piece (optional lead char + letters); of three spaces before a word, the last one
  // joins the word and the first two stay together.
  EXPECT_THAT(Enc(*tok, "   w"), ElementsAre(sp_sp, sp_w));
  (void)twelve;
}

TEST(HfBpeTokenizerTest, AddedTokenModes) {
  Fixture f;
  f.Added(300, "<|bos|>", /*special=*/true);
  f.Added(301, "<tool>", /*special=*/false);
  auto tok = f.Load();
  const std::string text = "a<|bos|><tool>";
  auto all = tok->EncodeWithSpecialTokens(text, false);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(*all, ElementsAre('a', 300, 301));
  auto non_special = tok->EncodeWith(text, false, AddedTokenSpellings::kNonSpecialOnly);
  ASSERT_TRUE(non_special.ok());
  EXPECT_EQ(non_special->back(), 301);
  EXPECT_THAT(*non_special, ::testing::Not(::testing::Contains(300)));
  // Plain text: neither spelling produces its id (forged control tokens stay text).
  const auto plain = Enc(*tok, text);
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(300)));
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(301)));
  EXPECT_EQ(plain.size(), text.size());
  EXPECT_EQ(tok->TokenToId("<tool>"), 301);
  EXPECT_TRUE(tok->IsSpecial(300));
  EXPECT_FALSE(tok->IsSpecial(301));
  EXPECT_EQ(tok->vocab_size(), 302);
}

TEST(HfBpeTokenizerTest, BosAndEosComeFromTheirSpellings) {
  Fixture f;
  f.Added(400, "<｜begin▁of▁sentence｜>", true);
  f.Added(401, "<｜end▁of▁sentence｜>", true);
  auto tok = f.Load();
  EXPECT_EQ(tok->bos_id(), 400);
  EXPECT_EQ(tok->eos_id(), 401);
  auto ids = tok->Encode("a", /*add_bos=*/true);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(400, 'a'));
  // Without a BOS spelling, asking for one is an error rather than a wrong id.
  auto none = Fixture().Load();
  EXPECT_EQ(none->bos_id(), Tokenizer::kNoToken);
  EXPECT_EQ(none->Encode("a", true).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HfBpeTokenizerTest, DecodeRoundTripsAndSkipsSpecialTokens) {
  Fixture f;
  f.Merge("Ġ", "w");
  f.Merge("h", "e");
  f.Added(300, "<|bos|>", true);
  f.Added(301, "<tool>", false);
  auto tok = f.Load();
  for (const std::string text : {"hello world", "中文 😀 e\u0301\n\t  x", "<|bos|><tool>", ""}) {
    auto decoded = tok->Decode(Enc(*tok, text));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, text);
  }
  const std::vector<std::int32_t> ids = {300, 'h', 301};
  auto decoded = tok->Decode(ids);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "h<tool>");
  EXPECT_FALSE(tok->DecodeToken(Tokenizer::kNoToken, 302).ok());
  EXPECT_FALSE(tok->DecodeToken(Tokenizer::kNoToken, -1).ok());
}

TEST(HfBpeTokenizerTest, IncrementalDecoderHoldsSplitCharacters) {
  auto tok = Fixture().Load();
  const auto ids = Enc(*tok, "é!");  // 0xC3, 0xA9, '!'
  ASSERT_EQ(ids.size(), 3u);
  IncrementalDecoder dec(*tok);
  auto first = dec.Push(ids[0]);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(*dec.Push(ids[1]), "é");
  EXPECT_EQ(*dec.Push(ids[2]), "!");
  EXPECT_EQ(dec.Flush(), "");
}

TEST(HfBpeTokenizerTest, InvalidUtf8IsAnError) {
  auto tok = Fixture().Load();
  for (const std::string& bad : {std::string("a\xff"), std::string("\xC3"), std::string("\xED\xA0\x80"),
                                std::string("\xC0\xAF")}) {
    auto ids = tok->Encode(bad, false);
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(ids.status().message(), HasSubstr("UTF-8"));
  }
}

TEST(HfBpeTokenizerTest, RandomBytesEncodeOrFailCleanly) {
  Fixture f;
  f.Merge("Ġ", "w");
  f.Added(300, "<|bos|>", true);
  auto tok = f.Load();
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", " ", "\n", "1", "中", "é", "<|bos|>", "\xff", "\xC3", "\x80"};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 20);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % std::size(alphabet)];
    auto ids = tok->EncodeWithSpecialTokens(text, false);
    if (!ids.ok()) {
      EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << ids.status();
      continue;
    }
    // Valid text round-trips exactly.
    auto decoded = tok->Decode(*ids);
    ASSERT_TRUE(decoded.ok());
    std::string without_special = text;
    for (std::size_t p; (p = without_special.find("<|bos|>")) != std::string::npos;) {
      without_special.erase(p, 7);
    }
    EXPECT_EQ(*decoded, without_special);
  }
}

TEST(HfBpeTokenizerTest, ByteFallbackAndUnkWithoutByteLevel) {
  Json j = {{"pre_tokenizer", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"<0xC3>", 3}, {"<0xA9>", 4}, {"ab", 5}}},
              {"merges", {"a b"}},
              {"unk_token", "<unk>"},
              {"byte_fallback", true},
              {"fuse_unk", true}}}};
  auto tok = HfBpeTokenizer::FromJson(j.dump(), "fallback");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT(Enc(**tok, "abé"), ElementsAre(5, 3, 4));
  // ç is C3 A7: no <0xA7>, so the whole character is unknown; consecutive unknowns fuse.
  EXPECT_THAT(Enc(**tok, "açç"), ElementsAre(1, 0));
}

}  // namespace
}  // namespace tandem::tokenizer
