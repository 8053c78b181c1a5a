#pragma once

// A deterministic toy model for engine tests. Each token's KV row records (token, position,
// layer tag, running prefix hash), where the prefix hash is chained from the previous position's
// row read back from the paged cache. Logits are a hash of every row of the prefix, read back
// through the block table. So a wrong block table, KV lost or overwritten, or a wrongly reused
// block changes the next token (or fails Forward when a row holds the wrong position).

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tandem/model/model.h"

namespace tandem::engine::testing {

inline std::uint64_t Mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct FakeModelOptions {
  int vocab_size = 64;
  int num_layers = 2;
  int max_position_embeddings = 512;
  int eos_token_id = 2;
  // Logits lie in [0, logit_range): small enough that temperature sampling spreads out.
  float logit_range = 6.0f;
};

class FakeModel : public model::Model {
 public:
  static constexpr int kFloatsPerToken = 4;

  explicit FakeModel(FakeModelOptions options = {}) : options_(options) {
    config_.name = "fake";
    config_.vocab_size = options.vocab_size;
    config_.num_layers = options.num_layers;
    config_.hidden_size = 8;
    config_.max_position_embeddings = options.max_position_embeddings;
    config_.eos_token_id = options.eos_token_id;
  }

  const model::ModelConfig& config() const override { return config_; }
  model::KvLayout kv_layout() const override { return {options_.num_layers, kFloatsPerToken}; }

  absl::Status Forward(std::span<const model::SequenceChunk> batch, const model::KvStorage& kv,
                       std::vector<float>* logits) override {
    if (fail_on_call_ == static_cast<int>(calls_.size())) {
      calls_.push_back({});
      return absl::InternalError("injected forward failure");
    }
    CallRecord record;
    for (const model::SequenceChunk& c : batch) {
      record.num_chunks++;
      record.num_tokens += static_cast<int>(c.tokens.size());
      const std::int64_t end = c.start_pos + static_cast<std::int64_t>(c.tokens.size());
      if (static_cast<std::int64_t>(c.block_table.size()) * kv.block_size < end) {
        return absl::InternalError("block table too short for the chunk");
      }
      for (std::int32_t b : c.block_table) {
        if (b < 0 || b >= kv.num_blocks) return absl::InternalError(absl::StrCat("bad block ", b));
      }
      for (std::size_t i = 0; i < c.tokens.size(); ++i) {
        const std::int64_t pos = c.start_pos + static_cast<std::int64_t>(i);
        if (c.tokens[i] < 0 || c.tokens[i] >= config_.vocab_size) {
          return absl::InternalError("token outside the vocabulary");
        }
        WriteRows(kv, c.block_table, pos, c.tokens[i]);
        const bool wants = c.logits == model::LogitsMode::kAll ||
                           (c.logits == model::LogitsMode::kLast && i + 1 == c.tokens.size());
        if (!wants) continue;
        std::uint64_t h = 0;
        for (std::int64_t p = 0; p <= pos; ++p) {
          for (int l = 0; l < options_.num_layers; ++l) {
            const float* row = kv.Layer(l, c.block_table).TokenRow(p);
            if (row[1] != static_cast<float>(p) || row[2] != LayerTag(l, row[0])) {
              return absl::InternalError(absl::StrCat("KV row of position ", p, " layer ", l,
                                                      " holds position ", row[1]));
            }
            h = Mix64(h ^ (static_cast<std::uint64_t>(row[0]) << 32) ^
                      static_cast<std::uint64_t>(row[3]));
          }
        }
        for (int v = 0; v < config_.vocab_size; ++v) {
          const std::uint64_t r = Mix64(h ^ (static_cast<std::uint64_t>(v) * 0x1234567ULL));
          logits->push_back(static_cast<float>(r >> 40) / static_cast<float>(1 << 24) *
                            options_.logit_range);
        }
      }
    }
    calls_.push_back(record);
    return absl::OkStatus();
  }

  struct CallRecord {
    int num_chunks = 0;
    int num_tokens = 0;
  };
  const std::vector<CallRecord>& calls() const { return calls_; }
  void FailOnCall(int index) { fail_on_call_ = index; }

 private:
  static float LayerTag(int layer, float token) { return static_cast<float>(layer * 1000) + token; }

  void WriteRows(const model::KvStorage& kv, std::span<const std::int32_t> table, std::int64_t pos,
                 std::int32_t token) const {
    // The prefix hash chains through the previous row as stored in the cache, the way attention
    // state depends on earlier KV.
    const std::uint32_t prev =
        pos == 0 ? 0u : static_cast<std::uint32_t>(kv.Layer(0, table).TokenRow(pos - 1)[3]);
    const auto chained = static_cast<float>(
        Mix64((static_cast<std::uint64_t>(prev) << 32) ^ (static_cast<std::uint64_t>(token) << 12) ^
              static_cast<std::uint64_t>(pos)) &
        0xFFFFFF);  // 24 bits: exact in a float
    for (int l = 0; l < options_.num_layers; ++l) {
      float* row = kv.Layer(l, table).TokenRow(pos);
      row[0] = static_cast<float>(token);
      row[1] = static_cast<float>(pos);
      row[2] = LayerTag(l, static_cast<float>(token));
      row[3] = chained;
    }
  }

  FakeModelOptions options_;
  model::ModelConfig config_;
  std::vector<CallRecord> calls_;
  int fail_on_call_ = -1;
};

}  // namespace tandem::engine::testing
