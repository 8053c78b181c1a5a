#include "hf_bpe_model.h"

#include <limits>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "byte_level.h"
#include "tandem/base/status_macros.h"
#include "unicode_text.h"

namespace tandem::tokenizer::internal {
namespace {

// Far beyond any real vocabulary; keeps a corrupt id from sizing a huge table.
constexpr std::int64_t kMaxVocabId = 1 << 24;
// Words up to this many symbols merge by rescanning a rank array (cheaper than a heap when short).
constexpr std::size_t kShortWord = 48;
constexpr std::uint32_t kNoRank = std::numeric_limits<std::uint32_t>::max();

absl::StatusOr<std::pair<std::string, std::string>> ParseMerge(const Json& m,
                                                               const std::string& where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const std::size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return FieldError(where, absl::StrCat("merge '", s, "' is not two tokens separated by one "
                                            "space"));
    }
    return std::make_pair(s.substr(0, space), s.substr(space + 1));
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return std::make_pair(m[0].get<std::string>(), m[1].get<std::string>());
  }
  return FieldError(where, "expected \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const Json& json, bool byte_level) {
  const std::string where = "model";
  TANDEM_ASSIGN_OR_RETURN(std::string type, StringField(json, where, "type"));
  if (type != "BPE") return FieldError("model.type", absl::StrCat("'", type, "' is not BPE"));
  if (const Json* d = OptionalField(json, "dropout");
      d != nullptr && !(d->is_number() && d->get<double>() == 0.0)) {
    return FieldError("model.dropout", "BPE dropout (random merges) is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const Json* f = OptionalField(json, key);
        f != nullptr && !(f->is_string() && f->get<std::string>().empty())) {
      return FieldError(absl::StrCat("model.", key), "is not supported");
    }
  }
  std::unique_ptr<BpeModel> model(new BpeModel());
  model->byte_level_ = byte_level;
  TANDEM_ASSIGN_OR_RETURN(model->byte_fallback_, BoolField(json, where, "byte_fallback", false));
  TANDEM_ASSIGN_OR_RETURN(model->ignore_merges_, BoolField(json, where, "ignore_merges", false));
  TANDEM_ASSIGN_OR_RETURN(model->fuse_unk_, BoolField(json, where, "fuse_unk", false));

  TANDEM_ASSIGN_OR_RETURN(const Json* vocab, Field(json, where, "vocab"));
  if (!vocab->is_object()) return FieldError("model.vocab", "expected an object");
  absl::flat_hash_map<std::string, std::int32_t> text_to_id;
  text_to_id.reserve(vocab->size());
  for (const auto& [text, id_json] : vocab->items()) {
    const std::string field = absl::StrCat("model.vocab['", text, "']");
    if (!id_json.is_number_integer()) return FieldError(field, "expected an integer id");
    const std::int64_t id = id_json.get<std::int64_t>();
    if (id < 0 || id >= kMaxVocabId) {
      return FieldError(field, absl::StrCat("id ", id, " is outside [0, ", kMaxVocabId, ")"));
    }
    if (static_cast<std::size_t>(id) >= model->vocab_.size()) model->vocab_.resize(id + 1);
    if (!model->vocab_[id].empty()) {
      return FieldError(field, absl::StrCat("id ", id, " is also used by '", model->vocab_[id],
                                            "'"));
    }
    if (text.empty()) return FieldError(field, "empty token");
    CodePoints check;
    if (const absl::Status st = DecodeUtf8(text, &check); !st.ok()) {
      return FieldError(field, st.message());
    }
    model->vocab_[id] = text;
    text_to_id.emplace(text, static_cast<std::int32_t>(id));
    if (!byte_level) {
      model->unit_to_id_.emplace(text, static_cast<std::int32_t>(id));
    } else {
      bool in_alphabet = false;
      std::string bytes = ByteLevelToBytes(text, &in_alphabet);
      if (in_alphabet) model->unit_to_id_.emplace(std::move(bytes), static_cast<std::int32_t>(id));
    }
  }
  auto id_of = [&](const std::string& text) {
    const auto it = text_to_id.find(text);
    return it == text_to_id.end() ? -1 : it->second;
  };
  for (int b = 0; b < 256; ++b) {
    model->byte_unit_id_[b] = model->Lookup(std::string(1, static_cast<char>(b)));
  }

  if (const Json* unk = OptionalField(json, "unk_token"); unk != nullptr) {
    if (!unk->is_string()) return FieldError("model.unk_token", "expected a string or null");
    model->unk_id_ = id_of(unk->get<std::string>());
    if (model->unk_id_ < 0) {
      return FieldError("model.unk_token",
                        absl::StrCat("'", unk->get<std::string>(), "' is not in the vocab"));
    }
  }

  TANDEM_ASSIGN_OR_RETURN(const Json* merges, Field(json, where, "merges"));
  if (!merges->is_array()) return FieldError("model.merges", "expected an array");
  model->merges_.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const std::string field = absl::StrCat("model.merges[", i, "]");
    TANDEM_ASSIGN_OR_RETURN(auto pair, ParseMerge((*merges)[i], field));
    const std::int32_t a = id_of(pair.first);
    const std::int32_t b = id_of(pair.second);
    const std::int32_t merged = id_of(pair.first + pair.second);
    for (const auto& [id, text] : {std::make_pair(a, pair.first), std::make_pair(b, pair.second),
                                   std::make_pair(merged, pair.first + pair.second)}) {
      if (id < 0) return FieldError(field, absl::StrCat("token '", text, "' is not in the vocab"));
    }
    // A repeated pair keeps its last rank, as the reference's map construction does.
    model->merges_[PairKey(a, b)] = Merge{static_cast<std::uint32_t>(i), merged};
  }
  return model;
}

void BpeModel::AppendInitialSymbols(absl::string_view piece,
                                    std::vector<std::int32_t>* symbols) const {
  bool previous_unk = false;
  std::size_t i = 0;
  while (i < piece.size()) {
    std::size_t len = 1;
    std::int32_t id;
    if (byte_level_) {
      id = byte_unit_id_[static_cast<unsigned char>(piece[i])];
    } else {
      const auto c = static_cast<unsigned char>(piece[i]);
      len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      id = Lookup(piece.substr(i, len));
    }
    if (id >= 0) {
      symbols->push_back(id);
      previous_unk = false;
      i += len;
      continue;
    }
    if (byte_fallback_) {
      // The bytes of the unit as the model sees it (a byte-level unit is its stand-in character).
      std::string unit;
      if (byte_level_) {
        AppendUtf8(ByteLevelChar(static_cast<unsigned char>(piece[i])), &unit);
      } else {
        unit.assign(piece.data() + i, len);
      }
      std::vector<std::int32_t> bytes;
      for (const char c : unit) {
        const std::int32_t b = Lookup(absl::StrFormat("<0x%02X>", static_cast<unsigned char>(c)));
        if (b < 0) break;
        bytes.push_back(b);
      }
      if (bytes.size() == unit.size()) {
        symbols->insert(symbols->end(), bytes.begin(), bytes.end());
        previous_unk = false;
        i += len;
        continue;
      }
    }
    if (unk_id_ >= 0 && !(fuse_unk_ && previous_unk)) symbols->push_back(unk_id_);
    previous_unk = unk_id_ >= 0;
    i += len;
  }
}

void BpeModel::MergeShort(std::vector<std::int32_t>* symbols) const {
  std::vector<std::int32_t>& sym = *symbols;
  // rank[i], merged[i]: the merge of sym[i] and sym[i + 1].
  std::uint32_t rank[kShortWord];
  std::int32_t merged[kShortWord];
  std::size_t n = sym.size();
  auto fill = [&](std::size_t i) {
    const Merge* m = FindMerge(sym[i], sym[i + 1]);
    rank[i] = m == nullptr ? kNoRank : m->rank;
    merged[i] = m == nullptr ? -1 : m->merged;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) fill(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks wins
    }
    if (rank[best] == kNoRank) break;
    sym[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      if (i + 1 < n - 1) {
        rank[i] = rank[i + 1];
        merged[i] = merged[i + 1];
      }
    }
    --n;
    if (best > 0) fill(best - 1);
    if (best + 1 < n) fill(best);
  }
  sym.resize(n);
}

void BpeModel::MergeLong(std::vector<std::int32_t>* symbols) const {
  std::vector<std::int32_t>& sym = *symbols;
  const int n = static_cast<int>(sym.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<bool> alive(n, true);
  struct Candidate {
    std::uint32_t rank;
    int left;
    std::int32_t merged;
  };
  // Lowest rank first, then leftmost: the order the reference's merge queue pops.
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (const Merge* m = FindMerge(sym[left], sym[next[left]]); m != nullptr) {
      queue.push({m->rank, left, m->merged});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (!alive[c.left] || next[c.left] < 0) continue;
    const int right = next[c.left];
    // Stale when either side changed since it was queued.
    const Merge* m = FindMerge(sym[c.left], sym[right]);
    if (m == nullptr || m->merged != c.merged || m->rank != c.rank) continue;
    sym[c.left] = c.merged;
    alive[right] = false;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  int out = 0;
  for (int i = 0; i < n; ++i) {
    if (alive[i]) sym[out++] = sym[i];
  }
  sym.resize(out);
}

void BpeModel::Encode(absl::string_view piece, std::vector<std::int32_t>* ids) const {
  if (ignore_merges_) {
    if (const std::int32_t id = Lookup(piece); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<std::int32_t> symbols;
  symbols.reserve(piece.size());
  AppendInitialSymbols(piece, &symbols);
  if (symbols.size() <= kShortWord) {
    MergeShort(&symbols);
  } else {
    MergeLong(&symbols);
  }
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

}  // namespace tandem::tokenizer::internal
