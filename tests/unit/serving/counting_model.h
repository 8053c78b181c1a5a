#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "tandem/model/model.h"

namespace tandem::serving::testing {

// A model whose greedy continuation of any sequence is last_token + 1 (mod vocab), so a test
// knows every request's exact output without a checkpoint. It keeps no KV, which is all the
// serving layer above the engine needs.
class CountingModel : public model::Model {
 public:
  // step_delay makes each forward take that long, so tests can act while a request is running.
  explicit CountingModel(int vocab = 64, int context = 256,
                         std::chrono::microseconds step_delay = std::chrono::microseconds(0))
      : step_delay_(step_delay) {
    config_.name = "counting";
    config_.vocab_size = vocab;
    config_.hidden_size = 4;
    config_.num_layers = 1;
    config_.max_position_embeddings = context;
    config_.bos_token_id = 1;
    config_.eos_token_id = 0;
  }
  const model::ModelConfig& config() const override { return config_; }
  model::KvLayout kv_layout() const override { return {1, 1}; }
  absl::Status Forward(std::span<const model::SequenceChunk> batch, const model::KvStorage&,
                       std::vector<float>* logits) override {
    if (step_delay_.count() > 0) std::this_thread::sleep_for(step_delay_);
    for (const auto& chunk : batch) {
      const int rows = chunk.logits == model::LogitsMode::kAll    ? static_cast<int>(chunk.tokens.size())
                       : chunk.logits == model::LogitsMode::kLast ? 1
                                                                  : 0;
      for (int r = 0; r < rows; ++r) {
        const int idx = chunk.logits == model::LogitsMode::kAll
                            ? r
                            : static_cast<int>(chunk.tokens.size()) - 1;
        std::vector<float> row(config_.vocab_size, 0.0f);
        row[(chunk.tokens[idx] + 1) % config_.vocab_size] = 10.0f;
        logits->insert(logits->end(), row.begin(), row.end());
      }
    }
    return absl::OkStatus();
  }

 private:
  model::ModelConfig config_;
  std::chrono::microseconds step_delay_;
};

}  // namespace tandem::serving::testing
