#include "tandem/routing/prefill_pieces.h"

#include <algorithm>
#include <cmath>

namespace tandem::routing {

std::optional<PrefillPiece> NextPiece(const PrefillPieceOptions& options,
                                      std::int64_t prompt_tokens, std::int64_t cached_tokens,
                                      std::int64_t last_piece_end_tokens, int block_size,
                                      double seconds_per_token, bool others_held,
                                      std::int64_t cut_limit_tokens) {
  if (!(options.piece_seconds > 0) || !(seconds_per_token > 0) || block_size <= 0 || others_held) {
    return std::nullopt;
  }
  const double blocks_per_piece =
      std::floor(options.piece_seconds / seconds_per_token / static_cast<double>(block_size));
  const std::int64_t piece_tokens =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::min(blocks_per_piece, 1e12))) *
      block_size;
  const std::int64_t done_tokens =
      std::max({std::int64_t{0}, cached_tokens, last_piece_end_tokens});
  const std::int64_t done = done_tokens / block_size * block_size;
  const double rest = static_cast<double>(prompt_tokens - done);
  if (!(rest > std::max(1.0, options.min_pieces) * static_cast<double>(piece_tokens))) {
    return std::nullopt;
  }
  std::int64_t end = done + piece_tokens;
  if (cut_limit_tokens >= 0) end = std::min(end, cut_limit_tokens / block_size * block_size);
  if (end <= done) return std::nullopt;
  return PrefillPiece{.start_tokens = done, .end_tokens = end};
}

std::vector<PrefillQueue::Ticket> ApplyPieceDone(PrefillQueue::Ticket ticket, WorkerSlot worker,
                                                 std::int64_t piece_uncached,
                                                 std::int64_t computed_tokens,
                                                 double compute_seconds, std::int64_t rest_uncached,
                                                 double now_seconds, double prior_seconds_per_token,
                                                 WorkerTable* table, PrefillQueue* queue) {
  table->OnPrefillFinished(worker, piece_uncached, /*blocks=*/0, computed_tokens, compute_seconds,
                           now_seconds);
  // The rest is still the worker's: in flight, and its compute starts where the piece ended.
  table->OnPrefillDispatched(worker, 0, 0, now_seconds);
  const WorkerState* state = table->Find(worker);
  const double seconds_per_token = state != nullptr
                                       ? state->PrefillSecondsPerToken(prior_seconds_per_token)
                                       : prior_seconds_per_token;
  return queue->Requeue(ticket, static_cast<double>(rest_uncached) * seconds_per_token,
                        rest_uncached);
}

}  // namespace tandem::routing
