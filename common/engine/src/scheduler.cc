// The scheduling half of Engine: which sequences run in the next step, with how many tokens, and
// who is preempted when the pool runs dry.
#include <algorithm>

#include "sequence.h"
#include "tandem/engine/engine.h"

namespace tandem::engine {

std::vector<Engine::ScheduledChunk> Engine::Schedule() {
  std::vector<ScheduledChunk> batch;
  int budget = config_.max_batch_tokens;
  const std::int64_t preemptions_before = num_preemptions_;

  // Decodes first so generation keeps flowing, then the rest of partially prefilled prompts.
  // Iterating by index is safe: preemption only ever removes running_.back().
  for (const bool decode_pass : {true, false}) {
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* seq = running_[i];
      if ((seq->num_remaining() == 1) != decode_pass) continue;
      if (!ScheduleRunning(seq, &budget, &batch)) break;
    }
  }

  // New work only when nothing had to be preempted this step, else it would be evicted again.
  if (num_preemptions_ == preemptions_before) {
    CompleteTierFetches(/*wait_for_one=*/false);
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int>(running_.size()) < config_.max_num_seqs) {
      if (!TryAdmit(waiting_.front(), &budget, &batch)) break;  // FCFS: nobody overtakes
    }
  }
  return batch;
}

bool Engine::ScheduleRunning(Sequence* seq, int* budget, std::vector<ScheduledChunk>* batch) {
  const int n = std::min(seq->num_remaining(), *budget);
  while (!blocks_->EnsureCapacity(&seq->table, seq->num_computed + n).ok()) {
    Sequence* victim = running_.back();  // most recently admitted
    Preempt(victim, budget, batch);
    if (victim == seq) return false;
  }
  batch->push_back({seq, n});
  *budget -= n;
  return true;
}

int Engine::BlocksReservedForNextStep(const std::vector<ScheduledChunk>& batch) const {
  // A decode that fills its last block this step needs a fresh block in the next one.
  int reserve = 0;
  for (const ScheduledChunk& c : batch) {
    const int after = c.seq->num_computed + c.num_tokens;
    if (after == static_cast<int>(c.seq->tokens.size()) && after % blocks_->block_size() == 0) {
      ++reserve;
    }
  }
  return reserve;
}

bool Engine::TryAdmit(Sequence* seq, int* budget, std::vector<ScheduledChunk>* batch) {
  const BlockManager::PrefixMatch match = blocks_->FindCachedPrefix(seq->tokens, seq->table.root);
  if (config_.lower_tiers != nullptr && !seq->tiers_looked_up) {
    seq->tiers_looked_up = true;
    // Out of waiting_ while its prefix is fetched, or back at the front already (host blocks).
    if (StartTierFetch(seq, match, *batch)) return true;
  }
  const int cached = static_cast<int>(match.blocks.size()) * blocks_->block_size();
  const int n = std::min(static_cast<int>(seq->tokens.size()) - cached, *budget);
  const int new_blocks = blocks_->BlocksFor(cached + n) - static_cast<int>(match.blocks.size());
  int reserve = 0;
  if (!running_.empty()) {
    reserve = BlocksReservedForNextStep(*batch);
    const int after = cached + n;
    if (after == static_cast<int>(seq->tokens.size()) && after % blocks_->block_size() == 0) {
      ++reserve;
    }
  }
  const int available = blocks_->num_free_blocks() - match.num_evictable;
  if (new_blocks + reserve > available) return false;

  blocks_->AcquirePrefix(match, &seq->table);
  // Cannot fail: `available` counted the blocks this takes.
  if (!blocks_->EnsureCapacity(&seq->table, cached + n).ok()) {
    blocks_->Release(&seq->table);
    return false;
  }
  seq->num_computed = cached;
  if (!seq->admitted_before) {
    CountPrefixReuse(*seq, static_cast<int>(match.blocks.size()));
    seq->cached_tokens = cached;
    seq->admitted_before = true;
  }
  seq->running = true;
  waiting_.pop_front();
  running_.push_back(seq);
  batch->push_back({seq, n});
  *budget -= n;
  return true;
}

void Engine::Preempt(Sequence* victim, int* budget, std::vector<ScheduledChunk>* batch) {
  auto scheduled = std::find_if(batch->begin(), batch->end(),
                                [&](const ScheduledChunk& c) { return c.seq == victim; });
  if (scheduled != batch->end()) {
    *budget += scheduled->num_tokens;
    batch->erase(scheduled);
  }
  // Recompute later: generated tokens stay part of the sequence and are prefilled again.
  blocks_->Release(&victim->table);
  victim->num_computed = 0;
  victim->running = false;
  victim->tiers_looked_up = false;  // its blocks may be in host memory by the time it returns
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.push_front(victim);
  ++num_preemptions_;
}

}  // namespace tandem::engine
