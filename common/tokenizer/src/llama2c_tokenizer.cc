#include "tandem/tokenizer/llama2c_tokenizer.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tandem/base/mapped_file.h"
#include "tandem/base/status_macros.h"

namespace tandem::tokenizer {
namespace {

// Far beyond any real vocabulary; guards against allocating from a corrupt size field.
constexpr std::int32_t kMaxPieceBytes = 1 << 16;

class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::size_t left() const { return bytes_.size() - offset_; }
  std::size_t offset() const { return offset_; }
  template <typename T>
  T Read() {
    T v;
    std::memcpy(&v, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return v;
  }
  std::string ReadString(std::size_t n) {
    std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_), n);
    offset_ += n;
    return s;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t offset_ = 0;
};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte a "<0xXX>" piece stands for, or -1 when the piece is ordinary text.
int ByteFallbackValue(absl::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = HexDigit(piece[3]);
  const int lo = HexDigit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::Load(const std::string& path,
                                                                         int vocab_size) {
  TANDEM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return FromBytes(file.bytes(), vocab_size, path);
}

absl::StatusOr<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::FromBytes(
    std::span<const std::uint8_t> bytes, int vocab_size, absl::string_view source_name) {
  if (vocab_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative vocab_size ", vocab_size));
  }
  Reader in(bytes);
  if (in.left() < sizeof(std::int32_t)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", source_name, " is ",
                                                   bytes.size(),
                                                   " bytes, too short for its header"));
  }
  const auto max_token_length = in.Read<std::int32_t>();
  if (max_token_length <= 0 || max_token_length > kMaxPieceBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", source_name,
                                                   ": max_token_length ", max_token_length,
                                                   " is outside (0, ", kMaxPieceBytes, "]"));
  }

  std::unique_ptr<Llama2cTokenizer> tok(new Llama2cTokenizer());
  while (vocab_size > 0 ? static_cast<int>(tok->pieces_.size()) < vocab_size : in.left() > 0) {
    const std::size_t id = tok->pieces_.size();
    const std::string where = absl::StrCat("tokenizer ", source_name, ", token ", id);
    if (in.left() < 2 * sizeof(std::int32_t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " at byte ", in.offset(), ": truncated, needs 8 bytes for score and length, ",
          in.left(), " left", vocab_size > 0 ? absl::StrCat(" (expected ", vocab_size, " tokens)")
                                             : std::string()));
    }
    const auto score = in.Read<float>();
    const auto length = in.Read<std::int32_t>();
    if (std::isnan(score)) return absl::InvalidArgumentError(absl::StrCat(where, ": score is NaN"));
    if (length < 0 || length > max_token_length) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": length ", length,
                                                     " is outside [0, max_token_length ",
                                                     max_token_length, "]"));
    }
    if (in.left() < static_cast<std::size_t>(length)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": truncated, piece needs ", length,
                                                     " bytes, ", in.left(), " left"));
    }
    tok->pieces_.push_back(in.ReadString(length));
    tok->scores_.push_back(score);
  }
  if (in.left() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", source_name, ": ", in.left(),
                                                   " trailing bytes after the expected ",
                                                   vocab_size, " tokens"));
  }

  constexpr int kByteTokens = 256;
  if (tok->pieces_.size() < static_cast<std::size_t>(kFirstByteToken + kByteTokens)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer ", source_name, " has ", tok->pieces_.size(), " tokens; at least ",
        kFirstByteToken + kByteTokens, " needed (<unk>, BOS, EOS and 256 byte-fallback tokens)"));
  }
  for (int b = 0; b < kByteTokens; ++b) {
    const std::string expected = absl::StrFormat("<0x%02X>", b);
    if (tok->pieces_[kFirstByteToken + b] != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer ", source_name, ", token ", kFirstByteToken + b, ": expected the "
                       "byte-fallback piece ", expected, ", file has '",
                       tok->pieces_[kFirstByteToken + b], "'"));
    }
  }

  tok->decoded_.reserve(tok->pieces_.size());
  for (std::size_t id = 0; id < tok->pieces_.size(); ++id) {
    const std::string& piece = tok->pieces_[id];
    // First occurrence wins should a file repeat a piece.
    tok->piece_to_id_.emplace(piece, static_cast<std::int32_t>(id));
    tok->longest_piece_ = std::max(tok->longest_piece_, piece.size());
    const int byte = ByteFallbackValue(piece);
    if (id == kBos || id == kEos) {
      tok->decoded_.emplace_back();
    } else if (byte >= 0) {
      tok->decoded_.emplace_back(1, static_cast<char>(byte));
    } else {
      tok->decoded_.push_back(piece);
    }
  }
  return tok;
}

std::int32_t Llama2cTokenizer::Lookup(absl::string_view piece) const {
  if (piece.size() > longest_piece_) return -1;
  const auto it = piece_to_id_.find(piece);
  return it == piece_to_id_.end() ? -1 : it->second;
}

absl::StatusOr<std::string> Llama2cTokenizer::DecodeToken(std::int32_t prev,
                                                          std::int32_t token) const {
  if (token < 0 || token >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", token, " is outside the vocabulary [0, ", vocab_size(), ")"));
  }
  absl::string_view text = decoded_[token];
  // SentencePiece's dummy prefix: the space the encoder put before the text is not part of it.
  if (prev == kBos && !text.empty() && text.front() == ' ') text.remove_prefix(1);
  return std::string(text);
}

}  // namespace tandem::tokenizer
