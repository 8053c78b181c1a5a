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

// The SentencePiece-style BPE tokenizer of llama2.c (`tokenizer.bin`), encoding exactly as its
// reference program does: a dummy-prefix space before non-empty text, one symbol per UTF-8
// character (bytes of unknown characters become byte-fallback tokens <0xXX> at id byte + 3), then
// greedy merges of the adjacent pair whose concatenation is the best-scoring vocab piece (leftmost
// on ties). Id 1 is BOS, 2 is EOS.
//
// File format: int32 max_token_length, then per token: float32 score, int32 length, bytes.
class Llama2cTokenizer final : public Tokenizer {
 public:
  static constexpr std::int32_t kBos = 1;
  static constexpr std::int32_t kEos = 2;
  static constexpr std::int32_t kFirstByteToken = 3;  // <0x00>; <0xFF> is 258

  // `vocab_size`: the model's vocabulary size (the file does not record it); 0 reads tokens up to
  // the end of the file. Fails with a message naming the offending token on a malformed file.
  static absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Load(const std::string& path,
                                                                int vocab_size = 0);
  static absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> FromBytes(
      std::span<const std::uint8_t> bytes, int vocab_size, absl::string_view source_name);

  absl::StatusOr<std::vector<std::int32_t>> Encode(absl::string_view text,
                                                   bool add_bos) const override;
  absl::StatusOr<std::string> DecodeToken(std::int32_t prev, std::int32_t token) const override;

  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::int32_t bos_id() const override { return kBos; }
  std::int32_t eos_id() const override { return kEos; }

  // The vocab entry as stored in the file (e.g. " Once", "<0x0A>").
  const std::string& piece(std::int32_t id) const { return pieces_[id]; }
  float score(std::int32_t id) const { return scores_[id]; }

 private:
  Llama2cTokenizer() = default;

  // Vocab id of an exact piece, or -1.
  std::int32_t Lookup(absl::string_view piece) const;
  // Initial symbols of `text`: one per UTF-8 character, byte-fallback tokens for unknown ones.
  void AppendSymbols(absl::string_view text, std::vector<std::int32_t>* ids) const;
  void MergePairs(std::vector<std::int32_t>* ids) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  // What each token decodes to: the piece itself, or the raw byte of a <0xXX> token.
  std::vector<std::string> decoded_;
  absl::flat_hash_map<std::string, std::int32_t> piece_to_id_;
  std::size_t longest_piece_ = 0;
};

}  // namespace tandem::tokenizer
