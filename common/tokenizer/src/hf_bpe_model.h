#pragma once

// The tokenizer.json BPE model: vocabulary, ranked merges, unknown-token handling.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "hf_json_util.h"

namespace tandem::tokenizer::internal {

class BpeModel {
 public:
  // `json`: the "model" member. `byte_level`: the pre-tokenizer maps bytes to GPT-2's alphabet,
  // so pieces are encoded byte by byte (vocab entries are looked up by the bytes they stand for).
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const Json& json, bool byte_level);

  // Appends the ids of one pre-tokenized piece (raw bytes, valid UTF-8).
  void Encode(absl::string_view piece, std::vector<std::int32_t>* ids) const;

  // Vocab entries as spelled in the file, by id (ids absent from the vocab: empty).
  const std::vector<std::string>& vocab() const { return vocab_; }

 private:
  struct Merge {
    std::uint32_t rank;
    std::int32_t merged;
  };
  static std::uint64_t PairKey(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  const Merge* FindMerge(std::int32_t a, std::int32_t b) const {
    const auto it = merges_.find(PairKey(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  std::int32_t Lookup(absl::string_view unit) const {
    const auto it = unit_to_id_.find(unit);
    return it == unit_to_id_.end() ? -1 : it->second;
  }
  void AppendInitialSymbols(absl::string_view piece, std::vector<std::int32_t>* symbols) const;
  void MergeShort(std::vector<std::int32_t>* symbols) const;
  void MergeLong(std::vector<std::int32_t>* symbols) const;

  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  std::int32_t unk_id_ = -1;
  std::vector<std::string> vocab_;
  // Vocab entries by the text they encode: raw bytes in byte-level mode, else the entry itself.
  absl::flat_hash_map<std::string, std::int32_t> unit_to_id_;
  std::int32_t byte_unit_id_[256];  // byte-level mode: the id of each single byte, or -1
  absl::flat_hash_map<std::uint64_t, Merge> merges_;
};

}  // namespace tandem::tokenizer::internal
