#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/prefill_queue.h"
#include "tandem/routing/types.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing {

// Prefills in pieces (docs/routing.md, rule 11). A prefill worker runs one prompt at a time (the
// engine gives a running prompt's next chunk its step budget before it admits a waiting one), so
// a short prompt sent to a worker just after a long one waits for all of it: a conversation's
// next turn behind another conversation's long first message. The router instead sends a long
// prompt's leading part as a piece of its own (a warm-up of that prefix: the worker computes it
// and keeps its KV), then holds the rest in the hold queue again with the time it has already
// waited, so a shorter prefill that came meanwhile goes first; the rest then computes from the
// cached pieces. Shortest remaining work first, at piece granularity.
//
// Only while nothing else is held for the worker when a piece would start: behind a queue every
// held prefill waits anyway and the shortest goes first already, so pieces would only add a
// per-prefill overhead each and make the longest prompts wait longer (rag under overload lost
// 0.4-2 s of p90 that way). Only a rest longer than `min_pieces` pieces is cut, so what is cut
// off is never a small tail.
struct PrefillPieceOptions {
  double piece_seconds = 0.5;  // compute per piece at the worker's learnt speed; 0: whole prompts
  double min_pieces = 2;
  double prior_prefill_seconds_per_token = TandemOptions{}.prior_prefill_seconds_per_token;
};

// The piece a worker computes next, in prompt tokens: [start_tokens, end_tokens), both whole
// blocks. `start_tokens` is what counts as done: `cached_tokens` (what the worker holds of the
// prompt) or `last_piece_end_tokens` (where the prompt's last piece there ended; 0: none),
// whichever is further, rounded down to a block, since a worker may have evicted its earlier
// pieces and the pieces must still advance.
struct PrefillPiece {
  std::int64_t start_tokens = 0;
  std::int64_t end_tokens = 0;

  friend bool operator==(const PrefillPiece&, const PrefillPiece&) = default;
};

// The piece a worker should compute now, or nullopt: the rest goes in one prefill.
// `others_held`: other prefills are held for the same worker. `cut_limit_tokens`: no piece ends
// past it (the first image position: a piece carries token ids only); < 0: none.
std::optional<PrefillPiece> NextPiece(const PrefillPieceOptions& options,
                                      std::int64_t prompt_tokens, std::int64_t cached_tokens,
                                      std::int64_t last_piece_end_tokens, int block_size,
                                      double seconds_per_token, bool others_held,
                                      std::int64_t cut_limit_tokens);

// Books a piece that ended on `worker`: its predicted share of the prefill's uncached tokens
// (`piece_uncached`) leaves the worker's queued work with a speed sample (`computed_tokens` in
// `compute_seconds`; 0 seconds: none) while the prefill stays in flight there, and the prefill is
// held again with `rest_uncached` tokens, predicted at the worker's learnt speed. The tickets the
// hold queue releases (the prefill's own when nothing held goes first).
std::vector<PrefillQueue::Ticket> ApplyPieceDone(PrefillQueue::Ticket ticket, WorkerSlot worker,
                                                 std::int64_t piece_uncached,
                                                 std::int64_t computed_tokens,
                                                 double compute_seconds, std::int64_t rest_uncached,
                                                 double now_seconds, double prior_seconds_per_token,
                                                 WorkerTable* table, PrefillQueue* queue);

// Whether prefills are cut into pieces: only by tandem's policy, only behind a hold queue
// (`hold_depth` > 0: the rest of a cut prompt waits there) and only with a piece size. The router
// and the simulator both ask this, so the two cut under the same conditions.
inline bool CutsPrefills(const PrefillPieceOptions& options, absl::string_view policy_name,
                         int hold_depth) {
  return options.piece_seconds > 0 && hold_depth > 0 && policy_name == "tandem";
}

}  // namespace tandem::routing
