#pragma once
// A checkpoint's token embedding table, read as the model reads it, for tests that hand the model
// rows of their own (input embeddings) and need the rows a token would have had.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/safetensors.h"

namespace tandem::model::testing {

struct EmbeddingTable {
  int hidden = 0;
  std::vector<float> values;  // vocab x hidden

  // The rows of `ids`, one after another.
  std::vector<float> Rows(const std::vector<std::int32_t>& ids) const {
    std::vector<float> rows;
    for (std::int32_t id : ids) {
      rows.insert(rows.end(), values.begin() + static_cast<std::ptrdiff_t>(id) * hidden,
                  values.begin() + static_cast<std::ptrdiff_t>(id + 1) * hidden);
    }
    return rows;
  }
};

inline absl::StatusOr<EmbeddingTable> LoadEmbeddingTable(const std::string& dir) {
  auto ckpt = internal::SafetensorsCheckpoint::Open(dir);
  if (!ckpt.ok()) return ckpt.status();
  auto table = ckpt->Get("model.embed_tokens.weight");
  if (!table.ok()) return table.status();
  EmbeddingTable out;
  out.hidden = static_cast<int>(table->cols);
  out.values.reserve(static_cast<std::size_t>(table->rows * table->cols));
  for (std::int64_t r = 0; r < table->rows; ++r) {
    for (std::int64_t c = 0; c < table->cols; ++c) out.values.push_back(table->At(r, c));
  }
  return out;
}

}  // namespace tandem::model::testing
