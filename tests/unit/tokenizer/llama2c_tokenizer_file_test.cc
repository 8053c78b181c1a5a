// Malformed tokenizer.bin files and the merge rules, on small synthetic vocabularies.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/tokenizer/llama2c_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Entry {
  float score;
  std::string piece;
};

// <unk>, BOS, EOS, the 256 byte tokens, then `extra`.
std::vector<Entry> BaseVocab(const std::vector<Entry>& extra) {
  std::vector<Entry> v = {{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}};
  for (int b = 0; b < 256; ++b) v.push_back({0, absl::StrFormat("<0x%02X>", b)});
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

template <typename T>
void Append(std::vector<std::uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

std::vector<std::uint8_t> Serialize(const std::vector<Entry>& vocab, std::int32_t max_len = 16) {
  std::vector<std::uint8_t> out;
  Append(&out, max_len);
  for (const Entry& e : vocab) {
    Append(&out, e.score);
    Append(&out, static_cast<std::int32_t>(e.piece.size()));
    out.insert(out.end(), e.piece.begin(), e.piece.end());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Parse(const std::vector<std::uint8_t>& bytes,
                                                        int vocab_size = 0) {
  return Llama2cTokenizer::FromBytes(bytes, vocab_size, "test.bin");
}

std::vector<std::string> Pieces(const Llama2cTokenizer& tok, const std::vector<std::int32_t>& ids) {
  std::vector<std::string> out;
  for (auto id : ids) out.push_back(tok.piece(id));
  return out;
}

TEST(Llama2cTokenizerFileTest, LoadsAValidFileFromDisk) {
  const auto path = std::filesystem::path(testing::TempDir()) / "llama2c_tok_valid.bin";
  const auto bytes = Serialize(BaseVocab({{-1, " "}, {-2, "a"}}));
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  auto tok = Llama2cTokenizer::Load(path.string(), 261);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 261);
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
}

TEST(Llama2cTokenizerFileTest, MissingFileIsAnError) {
  EXPECT_FALSE(Llama2cTokenizer::Load("/nonexistent/tokenizer.bin").ok());
}

TEST(Llama2cTokenizerFileTest, RejectsEmptyFileAndBadHeader) {
  EXPECT_THAT(Parse({}).status().message(), HasSubstr("too short"));
  EXPECT_THAT(Parse(Serialize(BaseVocab({}), /*max_len=*/0)).status().message(),
              HasSubstr("max_token_length 0"));
  EXPECT_THAT(Parse(Serialize(BaseVocab({}), /*max_len=*/1 << 30)).status().message(),
              HasSubstr("max_token_length"));
}

TEST(Llama2cTokenizerFileTest, RejectsTruncation) {
  auto bytes = Serialize(BaseVocab({{-1, "hello"}}));
  bytes.resize(bytes.size() - 2);  // inside the last piece
  EXPECT_THAT(Parse(bytes).status().message(), HasSubstr("token 259: truncated"));
  bytes.resize(bytes.size() - 7);  // inside the score/length pair
  EXPECT_THAT(Parse(bytes).status().message(), HasSubstr("token 259"));
}

TEST(Llama2cTokenizerFileTest, RejectsFewerTokensThanTheModelVocab) {
  const auto bytes = Serialize(BaseVocab({{-1, "a"}}));
  EXPECT_THAT(Parse(bytes, 300).status().message(), HasSubstr("expected 300 tokens"));
}

TEST(Llama2cTokenizerFileTest, RejectsTrailingBytesAfterTheModelVocab) {
  const auto bytes = Serialize(BaseVocab({{-1, "a"}, {-2, "b"}}));
  EXPECT_THAT(Parse(bytes, 260).status().message(), HasSubstr("trailing bytes"));
}

TEST(Llama2cTokenizerFileTest, RejectsNegativeAndOversizedLengths) {
  auto bytes = Serialize(BaseVocab({{-1, "abcd"}}));
  const std::size_t length_at = bytes.size() - 4 - 4;
  std::int32_t bad = -5;
  std::memcpy(bytes.data() + length_at, &bad, 4);
  EXPECT_THAT(Parse(bytes).status().message(), HasSubstr("token 259: length -5"));
  bad = 17;  // > max_token_length 16
  std::memcpy(bytes.data() + length_at, &bad, 4);
  EXPECT_THAT(Parse(bytes).status().message(), HasSubstr("length 17"));
}

TEST(Llama2cTokenizerFileTest, RejectsNanScores) {
  const auto bytes = Serialize(BaseVocab({{std::nanf(""), "a"}}));
  EXPECT_THAT(Parse(bytes).status().message(), HasSubstr("NaN"));
}

TEST(Llama2cTokenizerFileTest, RequiresByteFallbackTokensInPlace) {
  auto vocab = BaseVocab({});
  vocab[3 + 0x41].piece = "A";
  EXPECT_THAT(Parse(Serialize(vocab)).status().message(), HasSubstr("token 68"));
  vocab.resize(100);
  EXPECT_THAT(Parse(Serialize(vocab)).status().message(), HasSubstr("at least 259"));
}

TEST(Llama2cTokenizerFileTest, HigherScoreMergesFirst) {
  // "abc": "bc" outscores "ab", so the result is a + bc, not ab + c.
  auto tok = Parse(Serialize(BaseVocab({{-1, " "}, {-1, "a"}, {-1, "b"}, {-1, "c"},
                                        {-5, "ab"}, {-2, "bc"}})));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("abc", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Pieces(**tok, *ids), ElementsAre(" ", "a", "bc"));
}

TEST(Llama2cTokenizerFileTest, EqualScoresMergeLeftmostFirst) {
  auto tok = Parse(Serialize(BaseVocab({{-1, " "}, {-1, "a"}, {-1, "b"}, {-1, "c"},
                                        {-3, "ab"}, {-3, "bc"}, {-3, "aa"}})));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("abc", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Pieces(**tok, *ids), ElementsAre(" ", "ab", "c"));
  ids = (*tok)->Encode("aaa", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Pieces(**tok, *ids), ElementsAre(" ", "aa", "a"));
}

TEST(Llama2cTokenizerFileTest, MergedPiecesKeepMerging) {
  auto tok = Parse(Serialize(BaseVocab({{-1, " "}, {-1, "t"}, {-1, "h"}, {-1, "e"},
                                        {-2, "th"}, {-3, " th"}, {-4, " the"}})));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("the", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Pieces(**tok, *ids), ElementsAre("\n<s>\n", " the"));
}

TEST(Llama2cTokenizerFileTest, MissingDummyPrefixPieceFallsBackToAByte) {
  auto tok = Parse(Serialize(BaseVocab({{-1, "a"}})));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Encode("a", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(3 + ' ', 259));
}

}  // namespace
}  // namespace tandem::tokenizer
