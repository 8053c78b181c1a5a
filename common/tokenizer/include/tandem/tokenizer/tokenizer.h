#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::tokenizer {

// What the engine and services need from a tokenizer, whatever its file format (llama2.c
// tokenizer.bin, Hugging Face tokenizer.json byte-level BPE).
//
//   TANDEM_ASSIGN_OR_RETURN(std::vector<std::int32_t> ids, tok.Encode("Once upon", true));
//   TANDEM_ASSIGN_OR_RETURN(std::string text, tok.Decode(ids));
class Tokenizer {
 public:
  // `prev` for the first token of a text: no token precedes it.
  static constexpr std::int32_t kNoToken = -1;

  virtual ~Tokenizer() = default;

  virtual absl::StatusOr<std::vector<std::int32_t>> Encode(absl::string_view text,
                                                           bool add_bos) const = 0;

  // The bytes `token` adds to the text when it follows `prev` (kNoToken at the start). Bytes, not
  // characters: a byte-fallback token may carry one byte of a multi-byte UTF-8 character, which is
  // why streaming goes through IncrementalDecoder. Control tokens (BOS, EOS) decode to nothing.
  virtual absl::StatusOr<std::string> DecodeToken(std::int32_t prev, std::int32_t token) const = 0;

  // The whole text of `ids` (raw bytes; what the concatenated DecodeToken calls give).
  virtual absl::StatusOr<std::string> Decode(std::span<const std::int32_t> ids) const;

  virtual int vocab_size() const = 0;
  virtual std::int32_t bos_id() const = 0;
  virtual std::int32_t eos_id() const = 0;
};

}  // namespace tandem::tokenizer
