// Encoding half of Llama2cTokenizer: symbol splitting and the greedy pair merges.
#include <queue>
#include <string>
#include <vector>

#include "tandem/tokenizer/llama2c_tokenizer.h"

namespace tandem::tokenizer {
namespace {

bool IsContinuationByte(unsigned char c) { return (c & 0xC0) == 0x80; }

// A merge that was possible when it was queued; stale once either side has changed.
struct Candidate {
  float score;
  int left;  // symbol index; symbols keep their relative order, so this orders by position
  int right;
  std::int32_t left_id;
  std::int32_t right_id;
  std::int32_t merged_id;
};

// Best score first; on equal scores the leftmost pair, as a left-to-right scan keeping the first
// strict maximum would pick.
struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

void Llama2cTokenizer::AppendSymbols(absl::string_view text, std::vector<std::int32_t>* ids) const {
  // One symbol per UTF-8 character: a lead byte plus up to three continuation bytes. Malformed
  // input is split the same way (at most four bytes per symbol) and falls back to bytes.
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = i + 1;
    while (end < text.size() && end - i < 4 && IsContinuationByte(text[end])) ++end;
    const absl::string_view symbol = text.substr(i, end - i);
    const std::int32_t id = Lookup(symbol);
    if (id >= 0) {
      ids->push_back(id);
    } else {
      for (const char c : symbol) {
        ids->push_back(kFirstByteToken + static_cast<std::int32_t>(static_cast<unsigned char>(c)));
      }
    }
    i = end;
  }
}

void Llama2cTokenizer::MergePairs(std::vector<std::int32_t>* ids) const {
  const int n = static_cast<int>(ids->size());
  if (n < 2) return;
  // A doubly linked list over the symbols plus a queue of candidate merges makes this
  // O(n log n) while picking the same pair at every step as rescanning all pairs would.
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<std::int32_t>& sym = *ids;
  std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> queue;
  std::string joined;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    joined.assign(pieces_[sym[left]]);
    joined.append(pieces_[sym[right]]);
    const std::int32_t merged = Lookup(joined);
    if (merged >= 0) queue.push({scores_[merged], left, right, sym[left], sym[right], merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        sym[c.left] != c.left_id || sym[c.right] != c.right_id) {
      continue;
    }
    sym[c.left] = c.merged_id;
    alive[c.right] = false;
    next[c.left] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }

  int out = 0;
  for (int i = 0; i < n; ++i) {
    if (alive[i]) sym[out++] = sym[i];
  }
  sym.resize(out);
}

absl::StatusOr<std::vector<std::int32_t>> Llama2cTokenizer::Encode(absl::string_view text,
                                                                   bool add_bos) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() + 2);
  if (!text.empty()) {
    // SentencePiece's dummy prefix, so a word at the start encodes like one inside the text.
    AppendSymbols(" ", &ids);
    AppendSymbols(text, &ids);
  }
  MergePairs(&ids);
  if (add_bos) ids.insert(ids.begin(), kBos);
  return ids;
}

}  // namespace tandem::tokenizer
