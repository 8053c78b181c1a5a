#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/tokenizer/tokenizer.h"

namespace tandem::tokenizer {

namespace internal {
class AddedTokenMatcher;
class BpeModel;
class Normalizer;
class PreTokenizer;
}  // namespace internal

// Which added tokens (tokenizer.json "added_tokens") a piece of text may produce.
enum class AddedTokenSpellings {
  // None: every spelling ("<｜User｜>", "<think>", ...) is plain text and encodes through the BPE
  // model. What user-supplied text must use, so it cannot forge control tokens.
  kPlainText,
  // Non-special added tokens are recognized, special ones are plain text. Matches the reference
  // `tokenizers` with `encode_special_tokens = True` (transformers' split_special_tokens=True).
  kNonSpecialOnly,
  // All added tokens are recognized. Matches the reference `tokenizers`
  // `encode(text, add_special_tokens=False)` (its default handling of added tokens).
  kAll,
};

// A Hugging Face `tokenizer.json` with a BPE model (byte-level or not), id-exact against the
// reference `tokenizers` library for the components it supports: normalizers Sequence / Prepend /
// Replace(String); pre-tokenizers Sequence / Split (String patterns, and the regex patterns of the
// DeepSeek-V4 and GPT-2 tokenizers, matched by hand-written matchers) / Digits / ByteLevel;
// decoders ByteLevel / Sequence. Anything else fails to load with an error naming the field.
// The post_processor is not applied: callers ask for BOS with `add_bos` (DeepSeek's post-processor
// adds nothing). For text that holds no added-token spelling, all AddedTokenSpellings agree.
// Immutable after loading, so one instance may encode and decode from many threads.
//
// Text must be valid UTF-8 (the reference cannot be given anything else: a Python str that is not
// valid Unicode is rejected); invalid input is an InvalidArgument error, never a crash.
//
//   TANDEM_ASSIGN_OR_RETURN(auto tok, HfBpeTokenizer::Load("tokenizer.json"));
//   TANDEM_ASSIGN_OR_RETURN(auto user, tok->Encode(user_text, /*add_bos=*/false));     // plain text
//   TANDEM_ASSIGN_OR_RETURN(auto tmpl, tok->EncodeWithSpecialTokens("<｜User｜>", false));
class HfBpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<HfBpeTokenizer>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<HfBpeTokenizer>> FromJson(absl::string_view json,
                                                                  absl::string_view source_name);
  ~HfBpeTokenizer() override;

  // Every added-token spelling in `text` is plain text (AddedTokenSpellings::kPlainText).
  absl::StatusOr<std::vector<std::int32_t>> Encode(absl::string_view text,
                                                   bool add_bos) const override;
  // All added tokens are recognized (AddedTokenSpellings::kAll): for the renderer's own template
  // segments, never for user text.
  absl::StatusOr<std::vector<std::int32_t>> EncodeWithSpecialTokens(absl::string_view text,
                                                                    bool add_bos) const;
  absl::StatusOr<std::vector<std::int32_t>> EncodeWith(absl::string_view text, bool add_bos,
                                                       AddedTokenSpellings spellings) const;

  // Special added tokens decode to nothing (the reference's decode(skip_special_tokens=True));
  // non-special added tokens decode to their spelling; model tokens through the decoder.
  absl::StatusOr<std::string> DecodeToken(std::int32_t prev, std::int32_t token) const override;

  int vocab_size() const override { return static_cast<int>(token_text_.size()); }
  // The tokenizer.json does not say which token is BOS/EOS (tokenizer_config.json does); these are
  // the tokens spelled like DeepSeek's, Llama-3's or SentencePiece's (<s>, </s>), else kNoToken.
  std::int32_t bos_id() const override { return bos_id_; }
  std::int32_t eos_id() const override { return eos_id_; }

  // The id of an added token or vocab entry spelled exactly `text` (as stored in the file), or -1.
  std::int32_t TokenToId(absl::string_view text) const;
  // The spelling stored in the file ("Ġthe", "<｜User｜>"); empty for ids the file leaves unused.
  const std::string& IdToToken(std::int32_t id) const { return token_text_[id]; }
  bool IsSpecial(std::int32_t id) const;

 private:
  HfBpeTokenizer();

  absl::Status EncodeSegment(absl::string_view text, std::vector<std::int32_t>* ids) const;

  std::unique_ptr<internal::Normalizer> normalizer_;
  std::unique_ptr<internal::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<internal::BpeModel> model_;
  // Added tokens matched against the original text, and against normalized text.
  std::unique_ptr<internal::AddedTokenMatcher> added_;
  std::unique_ptr<internal::AddedTokenMatcher> added_normalized_;
  bool byte_level_decoder_ = false;
  std::vector<std::string> token_text_;
  // What each id decodes to (bytes); empty for special added tokens.
  std::vector<std::string> decoded_;
  std::vector<bool> special_;
  absl::flat_hash_map<std::string, std::int32_t> text_to_id_;
  std::int32_t bos_id_ = kNoToken;
  std::int32_t eos_id_ = kNoToken;
};

}  // namespace tandem::tokenizer
