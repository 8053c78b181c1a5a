#include "tandem/tokenizer/hf_bpe_tokenizer.h"

#include <deque>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "byte_level.h"
#include "hf_added_tokens.h"
#include "hf_bpe_model.h"
#include "hf_json_util.h"
#include "hf_normalizer.h"
#include "pretokenizer.h"
#include "tandem/base/status_macros.h"
#include "unicode_text.h"

namespace tandem::tokenizer {
namespace {

using internal::AddedToken;
using internal::BoolField;
using internal::Field;
using internal::FieldError;
using internal::Json;
using internal::OptionalField;
using internal::StringField;

constexpr std::int64_t kMaxAddedId = 1 << 24;

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const Json& root) {
  std::vector<AddedToken> tokens;
  const Json* list = OptionalField(root, "added_tokens");
  if (list == nullptr) return tokens;
  if (!list->is_array()) return FieldError("added_tokens", "expected an array");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& t = (*list)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    AddedToken token;
    TANDEM_ASSIGN_OR_RETURN(const Json* id, Field(t, where, "id"));
    if (!id->is_number_integer() || id->get<std::int64_t>() < 0 ||
        id->get<std::int64_t>() >= kMaxAddedId) {
      return FieldError(where + ".id", absl::StrCat("expected an integer in [0, ", kMaxAddedId,
                                                    ")"));
    }
    token.id = static_cast<std::int32_t>(id->get<std::int64_t>());
    TANDEM_ASSIGN_OR_RETURN(token.content, StringField(t, where, "content"));
    if (token.content.empty()) return FieldError(where + ".content", "empty");
    if (const absl::Status st = internal::DecodeUtf8(token.content, nullptr); !st.ok()) {
      return FieldError(where + ".content", st.message());
    }
    TANDEM_ASSIGN_OR_RETURN(token.special, BoolField(t, where, "special", false));
    TANDEM_ASSIGN_OR_RETURN(token.lstrip, BoolField(t, where, "lstrip", false));
    TANDEM_ASSIGN_OR_RETURN(token.rstrip, BoolField(t, where, "rstrip", false));
    TANDEM_ASSIGN_OR_RETURN(token.single_word, BoolField(t, where, "single_word", false));
    TANDEM_ASSIGN_OR_RETURN(token.normalized, BoolField(t, where, "normalized", !token.special));
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Only the ByteLevel decoder (alone or in a Sequence) is supported.
absl::Status ParseDecoder(const Json* decoder, const std::string& where, bool* byte_level) {
  if (decoder == nullptr) {
    return FieldError(where, "a missing decoder (tokens joined by spaces) is not supported");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string type, StringField(*decoder, where, "type"));
  if (type == "ByteLevel") {
    *byte_level = true;
    return absl::OkStatus();
  }
  if (type == "Sequence") {
    TANDEM_ASSIGN_OR_RETURN(const Json* list, Field(*decoder, where, "decoders"));
    if (!list->is_array()) return FieldError(where + ".decoders", "expected an array");
    for (std::size_t i = 0; i < list->size(); ++i) {
      TANDEM_RETURN_IF_ERROR(
          ParseDecoder(&(*list)[i], absl::StrCat(where, ".decoders[", i, "]"), byte_level));
    }
    return absl::OkStatus();
  }
  return FieldError(where + ".type", absl::StrCat("unsupported decoder '", type, "'"));
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer() = default;
HfBpeTokenizer::~HfBpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<HfBpeTokenizer>> HfBpeTokenizer::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open tokenizer file ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read tokenizer file ", path));
  auto tok = FromJson(buffer.str(), path);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), absl::StrCat(path, ": ", tok.status().message()));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<HfBpeTokenizer>> HfBpeTokenizer::FromJson(
    absl::string_view json, absl::string_view source_name) {
  const Json root = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, " is not valid JSON"));
  }
  if (!root.is_object()) return FieldError("(root)", "expected an object");

  std::unique_ptr<HfBpeTokenizer> tok(new HfBpeTokenizer());
  TANDEM_ASSIGN_OR_RETURN(tok->normalizer_,
                          internal::Normalizer::FromJson(OptionalField(root, "normalizer")));
  TANDEM_ASSIGN_OR_RETURN(tok->pre_tokenizer_,
                          internal::PreTokenizer::FromJson(OptionalField(root, "pre_tokenizer")));
  TANDEM_ASSIGN_OR_RETURN(const Json* model, Field(root, "(root)", "model"));
  TANDEM_ASSIGN_OR_RETURN(tok->model_,
                          internal::BpeModel::FromJson(*model, tok->pre_tokenizer_->byte_level()));
  TANDEM_RETURN_IF_ERROR(
      ParseDecoder(OptionalField(root, "decoder"), "decoder", &tok->byte_level_decoder_));
  TANDEM_ASSIGN_OR_RETURN(std::vector<AddedToken> added, ParseAddedTokens(root));

  const std::vector<std::string>& vocab = tok->model_->vocab();
  std::size_t size = vocab.size();
  for (const AddedToken& t : added) size = std::max(size, static_cast<std::size_t>(t.id) + 1);
  tok->token_text_.assign(size, std::string());
  tok->decoded_.assign(size, std::string());
  tok->special_.assign(size, false);
  auto decode_text = [&](const std::string& text) {
    return tok->byte_level_decoder_ ? internal::ByteLevelToBytes(text) : text;
  };
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    tok->token_text_[id] = vocab[id];
    tok->decoded_[id] = decode_text(vocab[id]);
    tok->text_to_id_.emplace(vocab[id], static_cast<std::int32_t>(id));
  }
  // An added token takes over its id, vocab entry or not (as in the reference's id_to_token).
  for (const AddedToken& t : added) {
    tok->token_text_[t.id] = t.content;
    tok->decoded_[t.id] = t.special ? std::string() : decode_text(t.content);
    tok->special_[t.id] = t.special;
    tok->text_to_id_[t.content] = t.id;
  }
  tok->added_ = std::make_unique<internal::AddedTokenMatcher>(added, /*normalized=*/false);
  // Tokens matched on normalized text are themselves normalized first, as the reference does
  // (under Prepend("_") the token "word" is looked for as "_word").
  std::vector<AddedToken> normalized_added = added;
  for (AddedToken& t : normalized_added) {
    if (t.normalized) t.content = tok->normalizer_->Normalize(t.content);
  }
  tok->added_normalized_ =
      std::make_unique<internal::AddedTokenMatcher>(normalized_added, /*normalized=*/true);

  for (const char* bos : {"<｜begin▁of▁sentence｜>", "<|begin_of_text|>", "<s>"}) {
    if (const std::int32_t id = tok->TokenToId(bos); id >= 0 && tok->bos_id_ == kNoToken) {
      tok->bos_id_ = id;
    }
  }
  for (const char* eos : {"<｜end▁of▁sentence｜>", "<|end_of_text|>", "</s>"}) {
    if (const std::int32_t id = tok->TokenToId(eos); id >= 0 && tok->eos_id_ == kNoToken) {
      tok->eos_id_ = id;
    }
  }
  return tok;
}

std::int32_t HfBpeTokenizer::TokenToId(absl::string_view text) const {
  const auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? kNoToken : it->second;
}

bool HfBpeTokenizer::IsSpecial(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

absl::StatusOr<std::vector<std::int32_t>> HfBpeTokenizer::Encode(absl::string_view text,
                                                                 bool add_bos) const {
  return EncodeWith(text, add_bos, AddedTokenSpellings::kPlainText);
}

absl::StatusOr<std::vector<std::int32_t>> HfBpeTokenizer::EncodeWithSpecialTokens(
    absl::string_view text, bool add_bos) const {
  return EncodeWith(text, add_bos, AddedTokenSpellings::kAll);
}

absl::Status HfBpeTokenizer::EncodeSegment(absl::string_view text,
                                           std::vector<std::int32_t>* ids) const {
  std::vector<absl::string_view> pieces;
  std::deque<std::string> storage;
  TANDEM_RETURN_IF_ERROR(pre_tokenizer_->Split(text, &pieces, &storage));
  for (const absl::string_view piece : pieces) model_->Encode(piece, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::int32_t>> HfBpeTokenizer::EncodeWith(
    absl::string_view text, bool add_bos, AddedTokenSpellings spellings) const {
  TANDEM_RETURN_IF_ERROR(internal::DecodeUtf8(text, nullptr));
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos) {
    if (bos_id_ == kNoToken) {
      return absl::FailedPreconditionError("this tokenizer.json has no recognizable BOS token");
    }
    ids.push_back(bos_id_);
  }
  const bool recognize = spellings != AddedTokenSpellings::kPlainText;
  const bool skip_special = spellings == AddedTokenSpellings::kNonSpecialOnly;
  // The reference's order: tokens matched on the original text first, then the normalizer runs on
  // what is left between them, then tokens matched on normalized text.
  std::vector<internal::Segment> outer;
  if (recognize) {
    added_->Split(text, skip_special, &outer);
  } else {
    outer.push_back({-1, text});
  }
  std::vector<internal::Segment> inner;
  std::string normalized;
  for (const internal::Segment& seg : outer) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    absl::string_view part = seg.text;
    if (!normalizer_->identity()) {
      normalized = normalizer_->Normalize(part);
      part = normalized;
    }
    inner.clear();
    if (recognize) {
      added_normalized_->Split(part, skip_special, &inner);
    } else {
      inner.push_back({-1, part});
    }
    for (const internal::Segment& s : inner) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        TANDEM_RETURN_IF_ERROR(EncodeSegment(s.text, &ids));
      }
    }
  }
  return ids;
}

absl::StatusOr<std::string> HfBpeTokenizer::DecodeToken(std::int32_t prev,
                                                        std::int32_t token) const {
  if (token < 0 || token >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", token, " is outside the vocabulary [0, ", vocab_size(), ")"));
  }
  return decoded_[token];
}

}  // namespace tandem::tokenizer
