#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tandem/engine/block_manager.h"
#include "tandem/engine/sampling.h"
#include "tandem/kernels/backend.h"
#include "tandem/kv/clock.h"
#include "tandem/kv/tiered_kv_store.h"
#include "tandem/kv/token_bucket.h"
#include "tandem/model/model.h"

namespace tandem::engine {

// An image's rows at its positions in a prompt. The prompt holds `rows` placeholder ids there
// (negative, derived from the image's content, so that prefix caching tells images apart); the
// model reads `data` (rows x hidden floats) instead of embedding them, and `token_id` (the
// image placeholder token) wherever it reads ids past the embedding.
struct InputImage {
  int position = 0;
  int rows = 0;
  std::int32_t token_id = 0;
  // Null when the sender expects the KV of these positions to be here already: a decode worker
  // that received the prompt's KV, or a worker whose prefix cache the router believes covers the
  // image (it then skips the encoder). A chunk that needs absent rows ends the request with
  // StepOutput.image_rows_missing, so the sender can supply them and retry.
  std::shared_ptr<const std::vector<float>> data;
};

struct EngineConfig {
  int block_size = 16;
  // Size of the KV pool: num_blocks when > 0, else as many blocks as kv_cache_bytes holds.
  int num_blocks = 0;
  std::int64_t kv_cache_bytes = 256LL << 20;
  int max_num_seqs = 64;
  // Tokens per forward step (decode tokens plus prefill chunks); long prompts are prefilled in
  // chunks so decodes keep flowing.
  int max_batch_tokens = 2048;
  bool enable_prefix_caching = true;
  // Host/disk tiers below the device pool (not owned; must outlive the engine). Blocks the pool
  // evicts are copied there, and admission fetches a prompt's prefix from there before
  // prefilling the rest. Ignored without prefix caching.
  kv::TieredKvStore* lower_tiers = nullptr;
  // Device-tier demotion (needs lower_tiers): while more than this fraction of the pool holds
  // KV, each Step() first copies the coldest unreferenced cached blocks to host memory, so
  // their eviction later costs no copy. 1.0 turns it off. Paced by a token bucket: at most
  // burst + rate * elapsed bytes over any window.
  double device_low_watermark = 1.0;
  std::uint64_t device_demotion_rate_bytes_per_s = 256ull << 20;
  std::uint64_t device_demotion_burst_bytes = 16ull << 20;
  // Time source of the demotion pacing; nullptr: the system clock. Must outlive the engine.
  const kv::Clock* clock = nullptr;
};

// Prefix reuse per tier, counted in blocks at a request's first admission. A prompt's reusable
// blocks (full blocks before the one holding its last token) are each a device hit, a host or
// disk hit (fetched into the pool), or a miss (computed).
struct KvTierStats {
  std::int64_t device_hit_blocks = 0;
  std::int64_t host_hit_blocks = 0;
  std::int64_t disk_hit_blocks = 0;
  std::int64_t miss_blocks = 0;
  // Blocks a lower tier announced but did not deliver (evicted, expired, corrupt meanwhile, or no
  // room in the pool): recomputed instead.
  std::int64_t fetch_shortfall_blocks = 0;
  std::int64_t spilled_blocks = 0;         // evicted device blocks copied to host memory
  std::int64_t spill_dropped_blocks = 0;   // host tier full or failing: not kept
  // Cached device blocks copied to host memory above the device watermark, before eviction.
  std::int64_t demoted_blocks = 0;
  std::int64_t evicted_demoted_blocks = 0;  // evictions that needed no copy: demoted earlier
};

// One completed fetch from the lower tiers, for latency metrics.
struct TierFetchReport {
  int host_blocks = 0;
  int disk_blocks = 0;
  double seconds = 0;  // from the fetch's start to the blocks being usable
};
using TierFetchObserver = std::function<void(const TierFetchReport&)>;

enum class FinishReason : std::uint8_t { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason reason);

// What one Step() produced for one request.
struct StepOutput {
  std::string request_id;
  std::vector<std::int32_t> new_tokens;  // includes a stop token that ended the request
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // set when finish_reason == kError
  // The error is that a chunk needed image rows the request did not carry (InputImage.data):
  // nothing is wrong with the request itself, it needs them sent.
  bool image_rows_missing = false;
  int prompt_tokens = 0;
  // Prompt tokens whose KV came from the prefix cache on first admission.
  int cached_tokens = 0;
};

struct GenerateResult {
  std::vector<std::int32_t> tokens;
  FinishReason finish_reason = FinishReason::kNone;
  int prompt_tokens = 0;
  int cached_tokens = 0;
};

struct EngineStats {
  int num_waiting = 0;
  int num_running = 0;
  int num_free_blocks = 0;
  int num_blocks = 0;
  std::int64_t num_preemptions = 0;
  std::int64_t num_steps = 0;
  // Steps that computed prompt tokens, and the prompt chunks they computed: chunks per step above
  // one means prompts were batched into one forward.
  std::int64_t num_prefill_steps = 0;
  std::int64_t num_prefill_chunks = 0;
  // Prompt tokens computed by forwards (prefix-cache hits excluded; recomputation after a
  // preemption included): the work a prefill autoscaler measures speed in.
  std::int64_t num_prefill_tokens = 0;
  // Prompt tokens still to compute over waiting, fetching and partially prefilled sequences
  // (waiting ones counted whole: their prefix-cache hits are only known at admission).
  std::int64_t queued_prefill_tokens = 0;
};

// Continuous-batching engine over one model. Not thread-safe: one caller drives Step().
//
//   TANDEM_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, backend, EngineConfig{}));
//   TANDEM_RETURN_IF_ERROR(engine->AddRequest("r1", prompt_ids, params));
//   while (engine->HasPendingWork()) { TANDEM_ASSIGN_OR_RETURN(auto outs, engine->Step()); ... }
class Engine {
 public:
  // `model` and `backend` must outlive the engine; the KV pool is allocated on `backend`.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(model::Model* model,
                                                        kernels::Backend* backend,
                                                        const EngineConfig& config);
  ~Engine();

  // Queues a request (FCFS). InvalidArgument for an empty prompt, ids outside the vocabulary,
  // prompt + max_tokens beyond the model's context or the KV pool, or bad sampling params;
  // AlreadyExists for an id in flight. A rejected request leaves no state behind.
  absl::Status AddRequest(const std::string& request_id, std::span<const std::int32_t> prompt,
                          const SamplingParams& params);

  // As AddRequest; with hold_kv the request's blocks are kept after it finishes (instead of
  // being released) until ReleaseHeldKv, so a prefill worker can ship the prompt's KV to a decode
  // worker after sampling the first token.
  struct RequestOptions {
    bool hold_kv = false;
    // Namespace and retention of the blocks this request leaves in the lower tiers.
    kv::TrafficClass traffic_class = kv::TrafficClass::kChat;
    // The last `resumed_tokens` of the prompt were generated by this request on another worker
    // (it migrated): they count as output, for max_tokens, the sampler's draw index and its
    // penalties, so the continuation is the one the first worker would have produced.
    int resumed_tokens = 0;
    // In position order, disjoint, inside the prompt, each with its rows.
    std::vector<InputImage> images;
  };
  absl::Status AddRequest(const std::string& request_id, std::span<const std::int32_t> prompt,
                          const SamplingParams& params, const RequestOptions& options);

  // Blocks of a finished hold_kv request, in position order (they hold its prompt's KV).
  absl::StatusOr<std::vector<std::int32_t>> HeldKvBlocks(const std::string& request_id) const;
  // Releases them (shared prefix blocks stay cached). NotFound for an unknown id.
  absl::Status ReleaseHeldKv(const std::string& request_id);

  // Disaggregated decode. ReserveBlocks takes enough free blocks for `num_tokens` out of the
  // pool (ResourceExhausted when it cannot, taking nothing); the caller owns them until it passes
  // them to AddPrefilledRequest or gives them back with ReleaseBlocks.
  absl::StatusOr<std::vector<std::int32_t>> ReserveBlocks(int num_tokens);
  void ReleaseBlocks(std::span<const std::int32_t> blocks);
  // Adds a request whose prompt KV is already in `blocks` (written by a prefill worker) and whose
  // first token was sampled there. It starts decoding at once; `first_token` counts towards
  // max_tokens and stop conditions but is not reported again. Takes ownership of `blocks` on
  // success only. `traffic_class`: as RequestOptions::traffic_class.
  absl::Status AddPrefilledRequest(const std::string& request_id,
                                   std::span<const std::int32_t> prompt, std::int32_t first_token,
                                   const SamplingParams& params,
                                   std::span<const std::int32_t> blocks,
                                   kv::TrafficClass traffic_class = kv::TrafficClass::kChat,
                                   int resumed_tokens = 0,
                                   std::vector<InputImage> images = {});

  // Stops a request and frees its blocks; the next Step() reports it finished (kCancelled).
  absl::Status Cancel(const std::string& request_id);

  // Runs one forward pass over a mixed batch: decode tokens of running sequences first, then
  // prefill chunks of partially prefilled and waiting sequences within max_batch_tokens.
  absl::StatusOr<std::vector<StepOutput>> Step();

  bool HasPendingWork() const;
  EngineStats stats() const;
  // stats().num_prefill_tokens without walking the queues (the loop reads it around every step).
  std::int64_t num_prefill_tokens() const { return num_prefill_tokens_; }
  BlockManager& block_manager() { return *blocks_; }
  KvTierStats kv_tier_stats() const;
  // Called on the thread driving the engine, once per completed lower-tier fetch.
  void SetTierFetchObserver(TierFetchObserver observer) { fetch_observer_ = std::move(observer); }
  const model::ModelConfig& model_config() const { return model_->config(); }

  // Runs one request to completion on an otherwise idle engine (FailedPrecondition otherwise).
  // The request id seeds sampling when params.seed is absent.
  absl::StatusOr<GenerateResult> Generate(std::span<const std::int32_t> prompt,
                                          const SamplingParams& params,
                                          const std::string& request_id = "generate");

 private:
  struct Sequence;
  struct ScheduledChunk {
    Sequence* seq;
    int num_tokens;
  };

  Engine(model::Model* model, const EngineConfig& config, std::unique_ptr<BlockManager> blocks);
  std::vector<ScheduledChunk> Schedule();
  bool ScheduleRunning(Sequence* seq, int* budget, std::vector<ScheduledChunk>* batch);
  bool TryAdmit(Sequence* seq, int* budget, std::vector<ScheduledChunk>* batch);
  // Lower tiers (tier_fetch.cc). StartTierFetch takes `seq` (the front of waiting_) out of the
  // queue while the blocks it can reuse from host/disk are copied into its pool blocks; true
  // when it did. Completed fetches register those blocks in the prefix cache and put the
  // sequence back at the front, where admission finds them as a device prefix.
  bool StartTierFetch(Sequence* seq, const BlockManager::PrefixMatch& match,
                      const std::vector<ScheduledChunk>& batch);
  void CompleteTierFetches(bool wait_for_one);
  void CompleteTierFetch(Sequence* seq);
  void SpillEvicted(const EvictedBlock& block);
  // Paced early copies of cold device blocks to host memory (tier_demotion.cc).
  void DemoteColdDeviceBlocks();
  bool DemoteBlock(const EvictedBlock& block);
  void CountPrefixReuse(const Sequence& seq, int device_blocks);
  void Preempt(Sequence* victim, int* budget, std::vector<ScheduledChunk>* batch);
  int BlocksReservedForNextStep(const std::vector<ScheduledChunk>& batch) const;
  void Finish(Sequence* seq, FinishReason reason, std::string error,
              std::vector<StepOutput>* outputs);
  // Frees its blocks (or, for a completed hold_kv request, keeps them) and forgets it.
  void Retire(Sequence* seq, bool completed = false);
  StepOutput MakeOutput(const Sequence& seq) const;
  void Sample(Sequence* seq, std::span<float> logits, StepOutput* out);
  // Sets out's finish reason when `token` (just appended) ends the request.
  void FinishIfDone(Sequence* seq, std::int32_t token, StepOutput* out) const;

  model::Model* model_;
  EngineConfig config_;
  std::unique_ptr<BlockManager> blocks_;
  absl::Status ValidateRequest(const std::string& request_id, std::span<const std::int32_t> prompt,
                               const SamplingParams& params, int resumed_tokens = 0,
                               std::span<const InputImage> images = {}) const;
  // The model's input rows for tokens [start, start + count) of `seq`: appended to `out`;
  // FailedPrecondition when an image there has no rows on this worker.
  absl::Status ImageSpans(const Sequence& seq, int start, int count,
                          std::vector<model::InputEmbeddings>* out) const;
  std::unique_ptr<Sequence> NewSequence(const std::string& request_id,
                                        std::span<const std::int32_t> prompt,
                                        const SamplingParams& params, int resumed_tokens = 0) const;

  absl::flat_hash_map<std::string, std::unique_ptr<Sequence>> sequences_;
  absl::flat_hash_map<std::string, BlockTable> held_kv_;  // finished hold_kv requests
  std::deque<Sequence*> waiting_;   // FCFS; preempted sequences go back to the front
  std::vector<Sequence*> running_;  // admission order
  std::vector<Sequence*> fetching_;  // waiting for lower-tier blocks, in no other queue
  KvTierStats tier_stats_;
  kv::SystemClock system_clock_;
  const kv::Clock* clock_;
  kv::TokenBucket demotion_bucket_;
  TierFetchObserver fetch_observer_;
  std::vector<StepOutput> pending_outputs_;  // cancellations reported by the next Step()
  std::int64_t num_preemptions_ = 0;
  std::int64_t num_steps_ = 0;
  std::int64_t num_prefill_steps_ = 0;
  std::int64_t num_prefill_chunks_ = 0;
  std::int64_t num_prefill_tokens_ = 0;
};

}  // namespace tandem::engine
