#include "tandem/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sequence.h"
#include "tandem/base/hash.h"
#include "tandem/base/status_macros.h"

namespace tandem::engine {
namespace {

std::uint64_t SeedFromRequestId(const std::string& id) {
  return StableHash64({reinterpret_cast<const std::uint8_t*>(id.data()), id.size()}, 0);
}

absl::Status ValidateConfig(const EngineConfig& c) {
  if (c.block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  if (c.max_num_seqs < 1) return absl::InvalidArgumentError("max_num_seqs must be >= 1");
  if (c.max_batch_tokens < 1) return absl::InvalidArgumentError("max_batch_tokens must be >= 1");
  if (c.num_blocks < 0) return absl::InvalidArgumentError("num_blocks must be >= 0");
  if (!(c.device_low_watermark > 0 && c.device_low_watermark <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("device_low_watermark must be in (0, 1], got ",
                                                   c.device_low_watermark));
  }
  if (c.device_low_watermark < 1 && c.device_demotion_rate_bytes_per_s == 0) {
    return absl::InvalidArgumentError("device demotion needs a positive rate");
  }
  if (c.num_blocks == 0 && c.kv_cache_bytes <= 0) {
    return absl::InvalidArgumentError("set num_blocks or a positive kv_cache_bytes");
  }
  return absl::OkStatus();
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(model::Model* model,
                                                       kernels::Backend* backend,
                                                       const EngineConfig& config) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine needs a model");
  TANDEM_RETURN_IF_ERROR(ValidateConfig(config));
  const model::KvLayout layout = model->kv_layout();
  BlockManagerConfig bm;
  bm.block_size = config.block_size;
  bm.enable_prefix_caching = config.enable_prefix_caching;
  bm.num_blocks = config.num_blocks;
  if (bm.num_blocks == 0) {
    const std::int64_t block_bytes = static_cast<std::int64_t>(sizeof(float)) * config.block_size *
                                     layout.num_layers * layout.floats_per_token;
    if (block_bytes <= 0) return absl::InvalidArgumentError("model reports an empty KV layout");
    const std::int64_t n = config.kv_cache_bytes / block_bytes;
    if (n < 1) {
      return absl::InvalidArgumentError(absl::StrCat("kv_cache_bytes ", config.kv_cache_bytes,
                                                     " is below one KV block (", block_bytes,
                                                     " bytes)"));
    }
    bm.num_blocks = static_cast<int>(std::min<std::int64_t>(n, 1 << 30));
  }
  TANDEM_ASSIGN_OR_RETURN(auto blocks, BlockManager::Create(bm, layout, backend));
  return std::unique_ptr<Engine>(new Engine(model, config, std::move(blocks)));
}

Engine::Engine(model::Model* model, const EngineConfig& config,
               std::unique_ptr<BlockManager> blocks)
    : model_(model),
      config_(config),
      blocks_(std::move(blocks)),
      clock_(config.clock != nullptr ? config.clock : &system_clock_),
      demotion_bucket_(config.device_demotion_rate_bytes_per_s,
                       config.device_demotion_burst_bytes, clock_->NowUnixMs()) {
  if (!config_.enable_prefix_caching) config_.lower_tiers = nullptr;
  if (config_.lower_tiers != nullptr) {
    blocks_->SetEvictionSpill([this](const EvictedBlock& block) { SpillEvicted(block); });
  }
}

Engine::~Engine() {
  // Fetch threads write into the pool until their fetch completes.
  for (Sequence* seq : fetching_) seq->fetch->done.wait();
}

absl::Status Engine::ValidateRequest(const std::string& request_id,
                                     std::span<const std::int32_t> prompt,
                                     const SamplingParams& params, int resumed_tokens,
                                     std::span<const InputImage> images) const {
  const model::ModelConfig& mc = model_->config();
  if (request_id.empty()) return absl::InvalidArgumentError("request id is empty");
  if (sequences_.contains(request_id) || held_kv_.contains(request_id)) {
    return absl::AlreadyExistsError(absl::StrCat("request ", request_id, " is already in flight"));
  }
  if (prompt.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": prompt is empty"));
  }
  int covered_until = 0;  // end of the last image
  const std::size_t generated_from = prompt.size() - std::max(0, resumed_tokens);
  for (const InputImage& image : images) {
    const std::size_t expected = static_cast<std::size_t>(std::max(0, image.rows)) * mc.hidden_size;
    if (image.rows <= 0 || image.position < covered_until ||
        static_cast<std::size_t>(image.position) + image.rows > generated_from) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", request_id, ": image at [", image.position, ", ",
          image.position + image.rows, ") is not inside the prompt, in order and disjoint"));
    }
    if (image.token_id < 0 || image.token_id >= mc.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": image token id ",
                                                     image.token_id, " is out of range"));
    }
    if (image.data != nullptr && image.data->size() != expected) {
      return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": image at ",
                                                     image.position, " has ", image.data->size(),
                                                     " floats, the model needs ", expected));
    }
    covered_until = image.position + image.rows;
  }
  std::size_t next_image = 0;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    while (next_image < images.size() &&
           images[next_image].position + images[next_image].rows <= static_cast<int>(i)) {
      ++next_image;
    }
    if (next_image < images.size() && images[next_image].position <= static_cast<int>(i)) {
      continue;  // a placeholder: any id
    }
    if (prompt[i] < 0 || prompt[i] >= mc.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", request_id, ": prompt token ", i, " is ", prompt[i],
                       ", outside the vocabulary [0, ", mc.vocab_size, ")"));
    }
  }
  if (absl::Status s = ValidateSamplingParams(params, mc.vocab_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": ", s.message()));
  }
  if (resumed_tokens < 0 || resumed_tokens >= static_cast<int>(prompt.size()) ||
      resumed_tokens >= params.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request_id, ": ", resumed_tokens, " resumed tokens must be fewer than the ",
        prompt.size(), " prompt tokens and the max_tokens of ", params.max_tokens));
  }
  // Resumed tokens are output already counted in max_tokens.
  const std::int64_t total =
      static_cast<std::int64_t>(prompt.size()) + params.max_tokens - resumed_tokens;
  if (mc.max_position_embeddings > 0 && total > mc.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request_id, ": prompt (", prompt.size(), " tokens) + max_tokens (",
        params.max_tokens, ") = ", total, " exceeds the model context of ",
        mc.max_position_embeddings, " tokens"));
  }
  // The last generated token is never fed back, so its KV needs no slot.
  const std::int64_t kv_tokens = total - 1;
  const std::int64_t pool_tokens =
      static_cast<std::int64_t>(blocks_->num_blocks()) * blocks_->block_size();
  if (kv_tokens > pool_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request_id, ": needs KV for ", kv_tokens, " tokens but the whole pool holds ",
        pool_tokens));
  }
  return absl::OkStatus();
}

std::unique_ptr<Engine::Sequence> Engine::NewSequence(const std::string& request_id,
                                                      std::span<const std::int32_t> prompt,
                                                      const SamplingParams& params,
                                                      int resumed_tokens) const {
  auto seq = std::make_unique<Sequence>();
  seq->id = request_id;
  seq->tokens.assign(prompt.begin(), prompt.end());
  seq->tokens.reserve(prompt.size() + params.max_tokens);
  seq->prompt_len = static_cast<int>(prompt.size()) - resumed_tokens;
  seq->params = params;
  seq->seed = params.seed.has_value() ? *params.seed : SeedFromRequestId(request_id);
  seq->table.root = params.kv_hash_root;
  return seq;
}

absl::Status Engine::AddRequest(const std::string& request_id,
                                std::span<const std::int32_t> prompt,
                                const SamplingParams& params) {
  return AddRequest(request_id, prompt, params, RequestOptions{});
}

absl::Status Engine::AddRequest(const std::string& request_id,
                                std::span<const std::int32_t> prompt, const SamplingParams& params,
                                const RequestOptions& options) {
  TANDEM_RETURN_IF_ERROR(
      ValidateRequest(request_id, prompt, params, options.resumed_tokens, options.images));
  std::unique_ptr<Sequence> seq = NewSequence(request_id, prompt, params, options.resumed_tokens);
  seq->hold_kv = options.hold_kv;
  seq->images = options.images;
  if (absl::Status cls = kv::ValidateTrafficClass(options.traffic_class); !cls.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": ", cls.message()));
  }
  seq->traffic_class = options.traffic_class;
  seq->table.tag = static_cast<std::uint8_t>(options.traffic_class);
  waiting_.push_back(seq.get());
  sequences_.emplace(request_id, std::move(seq));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::int32_t>> Engine::HeldKvBlocks(
    const std::string& request_id) const {
  auto it = held_kv_.find(request_id);
  if (it == held_kv_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", request_id, " holds no KV"));
  }
  return it->second.blocks;
}

absl::Status Engine::ReleaseHeldKv(const std::string& request_id) {
  auto it = held_kv_.find(request_id);
  if (it == held_kv_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", request_id, " holds no KV"));
  }
  blocks_->Release(&it->second);
  held_kv_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::int32_t>> Engine::ReserveBlocks(int num_tokens) {
  if (num_tokens <= 0) return absl::InvalidArgumentError("num_tokens must be positive");
  // More than the whole pool can never succeed: not a capacity refusal worth retrying.
  if (blocks_->BlocksFor(num_tokens) > blocks_->num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(num_tokens, " tokens of KV exceed the pool of ",
                                                   blocks_->num_blocks(), " blocks"));
  }
  BlockTable table;
  if (absl::Status st = blocks_->EnsureCapacity(&table, num_tokens); !st.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("no room for ", num_tokens,
                                                     " tokens of KV: ", st.message()));
  }
  return std::move(table.blocks);
}

void Engine::ReleaseBlocks(std::span<const std::int32_t> blocks) {
  BlockTable table;
  table.blocks.assign(blocks.begin(), blocks.end());
  blocks_->Release(&table);
}

absl::Status Engine::AddPrefilledRequest(const std::string& request_id,
                                         std::span<const std::int32_t> prompt,
                                         std::int32_t first_token, const SamplingParams& params,
                                         std::span<const std::int32_t> blocks,
                                         kv::TrafficClass traffic_class, int resumed_tokens,
                                         std::vector<InputImage> images) {
  TANDEM_RETURN_IF_ERROR(ValidateRequest(request_id, prompt, params, resumed_tokens, images));
  if (absl::Status cls = kv::ValidateTrafficClass(traffic_class); !cls.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": ", cls.message()));
  }
  if (first_token < 0 || first_token >= model_->config().vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request_id, ": first token ", first_token, " is out of range"));
  }
  if (static_cast<int>(blocks.size()) != blocks_->BlocksFor(static_cast<int>(prompt.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request_id, ": ", blocks.size(),
                                                   " blocks cannot hold exactly a prompt of ",
                                                   prompt.size(), " tokens"));
  }
  std::unique_ptr<Sequence> seq = NewSequence(request_id, prompt, params, resumed_tokens);
  seq->table.blocks.assign(blocks.begin(), blocks.end());
  seq->traffic_class = traffic_class;
  seq->table.tag = static_cast<std::uint8_t>(traffic_class);
  seq->num_computed = static_cast<int>(prompt.size());
  seq->images = std::move(images);
  seq->admitted_before = true;
  seq->running = true;
  Sequence* raw = seq.get();
  sequences_.emplace(request_id, std::move(seq));
  running_.push_back(raw);
  // The first token goes through the same stop rules as any sampled token, but its report
  // already reached the client through the prefill worker.
  StepOutput first = MakeOutput(*raw);
  raw->tokens.push_back(first_token);
  FinishIfDone(raw, first_token, &first);
  if (first.finished) Finish(raw, first.finish_reason, "", &pending_outputs_);
  return absl::OkStatus();
}

absl::Status Engine::Cancel(const std::string& request_id) {
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", request_id, " is not in flight"));
  }
  Finish(it->second.get(), FinishReason::kCancelled, "", &pending_outputs_);
  return absl::OkStatus();
}

StepOutput Engine::MakeOutput(const Sequence& seq) const {
  StepOutput out;
  out.request_id = seq.id;
  out.prompt_tokens = seq.prompt_len;
  out.cached_tokens = seq.cached_tokens;
  return out;
}

void Engine::Finish(Sequence* seq, FinishReason reason, std::string error,
                    std::vector<StepOutput>* outputs) {
  StepOutput out = MakeOutput(*seq);
  out.finished = true;
  out.finish_reason = reason;
  out.error = std::move(error);
  outputs->push_back(std::move(out));
  Retire(seq);
}

void Engine::Retire(Sequence* seq, bool completed) {
  if (seq->fetch != nullptr) {
    // Fetch threads may still be writing into its blocks: wait (a few block reads at most).
    seq->fetch->done.wait();
    seq->fetch.reset();
    fetching_.erase(std::find(fetching_.begin(), fetching_.end(), seq));
    blocks_->Release(&seq->table);
    sequences_.erase(seq->id);  // destroys seq
    return;
  }
  // Only a request that completed keeps its KV for a handoff; a cancelled or failed one has
  // nobody to hand it to.
  if (completed && seq->hold_kv) {
    held_kv_.emplace(seq->id, std::move(seq->table));
    seq->table = BlockTable{};
  } else {
    blocks_->Release(&seq->table);
  }
  if (seq->running) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  }
  sequences_.erase(seq->id);  // destroys seq
}

void Engine::Sample(Sequence* seq, std::span<float> logits, StepOutput* out) {
  const TokenHistory history{seq->prompt(), seq->generated()};
  const std::int32_t token = SampleToken(seq->params, seq->seed,
                                         static_cast<std::uint64_t>(seq->num_generated()),
                                         history, logits);
  seq->tokens.push_back(token);
  out->new_tokens.push_back(token);
  FinishIfDone(seq, token, out);
}

void Engine::FinishIfDone(Sequence* seq, std::int32_t token, StepOutput* out) const {
  const SamplingParams& p = seq->params;
  const bool stop = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
                        p.stop_token_ids.end() ||
                    (!p.ignore_eos && token == model_->config().eos_token_id);
  if (stop) {
    out->finish_reason = FinishReason::kStop;
  } else if (seq->num_generated() >= p.max_tokens) {
    out->finish_reason = FinishReason::kLength;
  }
  out->finished = out->finish_reason != FinishReason::kNone;
}

absl::StatusOr<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> outputs = std::move(pending_outputs_);
  pending_outputs_.clear();
  DemoteColdDeviceBlocks();
  const std::vector<ScheduledChunk> scheduled = Schedule();
  if (scheduled.empty()) {
    CompleteTierFetches(/*wait_for_one=*/true);
    return outputs;
  }
  ++num_steps_;

  // Image rows of each chunk; a sequence whose rows are not here (its KV came from a prefill
  // worker and was then preempted and evicted, or the prefix cache no longer holds an image the
  // router skipped encoding) cannot be computed here and ends, flagged for the sender.
  std::vector<ScheduledChunk> batch;
  std::vector<std::vector<model::InputEmbeddings>> image_spans;
  for (const ScheduledChunk& c : scheduled) {
    std::vector<model::InputEmbeddings> spans;
    if (absl::Status st = ImageSpans(*c.seq, c.seq->num_computed, c.num_tokens, &spans);
        !st.ok()) {
      Finish(c.seq, FinishReason::kError, std::string(st.message()), &outputs);
      outputs.back().image_rows_missing = true;
      continue;
    }
    batch.push_back(c);
    image_spans.push_back(std::move(spans));
  }
  if (batch.empty()) return outputs;

  std::vector<model::SequenceChunk> chunks;
  chunks.reserve(batch.size());
  int logit_rows = 0;
  int prefill_chunks = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const ScheduledChunk& c = batch[i];
    if (c.seq->num_computed < c.seq->prompt_len) {
      ++prefill_chunks;
      num_prefill_tokens_ += std::min(c.num_tokens, c.seq->prompt_len - c.seq->num_computed);
    }
    model::SequenceChunk chunk;
    chunk.tokens = std::span<const std::int32_t>(c.seq->tokens).subspan(c.seq->num_computed,
                                                                       c.num_tokens);
    chunk.start_pos = c.seq->num_computed;
    chunk.block_table = c.seq->table.blocks;
    const bool completes = c.seq->num_computed + c.num_tokens ==
                           static_cast<int>(c.seq->tokens.size());
    chunk.logits = completes ? model::LogitsMode::kLast : model::LogitsMode::kNone;
    chunk.embeddings = image_spans[i];
    logit_rows += completes ? 1 : 0;
    chunks.push_back(chunk);
  }
  num_prefill_chunks_ += prefill_chunks;
  if (prefill_chunks > 0) ++num_prefill_steps_;

  std::vector<float> logits;
  const std::size_t vocab = model_->config().vocab_size;
  absl::Status status = model_->Forward(chunks, blocks_->storage(), &logits);
  if (status.ok() && logits.size() != vocab * logit_rows) {
    status = absl::InternalError(absl::StrCat("model returned ", logits.size(),
                                              " logits, expected ", vocab * logit_rows));
  }
  if (!status.ok()) {
    // The KV these chunks wrote is suspect: end the requests rather than serve wrong tokens.
    for (const ScheduledChunk& c : batch) {
      Finish(c.seq, FinishReason::kError, std::string(status.message()), &outputs);
    }
    return outputs;
  }

  std::size_t row = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Sequence* seq = batch[i].seq;
    seq->num_computed += batch[i].num_tokens;
    blocks_->CommitComputedBlocks(seq->tokens, seq->num_computed, &seq->table);
    if (chunks[i].logits != model::LogitsMode::kLast) continue;
    StepOutput out = MakeOutput(*seq);
    Sample(seq, std::span<float>(logits).subspan(row * vocab, vocab), &out);
    ++row;
    outputs.push_back(std::move(out));
    if (outputs.back().finished) Retire(seq, /*completed=*/true);
  }
  return outputs;
}

absl::Status Engine::ImageSpans(const Sequence& seq, int start, int count,
                                std::vector<model::InputEmbeddings>* out) const {
  const int end = start + count;
  const std::size_t hidden = model_->config().hidden_size;
  for (const InputImage& image : seq.images) {
    const int from = std::max(start, image.position);
    const int to = std::min(end, image.position + image.rows);
    if (from >= to) continue;
    if (image.data == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "request ", seq.id, ": positions [", from, ", ", to, ") of its image at ", image.position,
          " must be computed and its rows were not sent (its KV is not cached here)"));
    }
    out->push_back({from - start, to - from,
                    image.data->data() + static_cast<std::size_t>(from - image.position) * hidden,
                    image.token_id});
  }
  return absl::OkStatus();
}

bool Engine::HasPendingWork() const { return !sequences_.empty() || !pending_outputs_.empty(); }

KvTierStats Engine::kv_tier_stats() const {
  KvTierStats s = tier_stats_;
  s.evicted_demoted_blocks = blocks_->num_demoted_evictions();
  return s;
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.num_waiting = static_cast<int>(waiting_.size() + fetching_.size());
  s.num_running = static_cast<int>(running_.size());
  s.num_free_blocks = blocks_->num_free_blocks();
  s.num_blocks = blocks_->num_blocks();
  s.num_preemptions = num_preemptions_;
  s.num_steps = num_steps_;
  s.num_prefill_steps = num_prefill_steps_;
  s.num_prefill_chunks = num_prefill_chunks_;
  s.num_prefill_tokens = num_prefill_tokens_;
  // A preempted sequence recomputes its generated tokens too, hence num_remaining() off the batch.
  for (const Sequence* seq : waiting_) s.queued_prefill_tokens += seq->num_remaining();
  for (const Sequence* seq : fetching_) s.queued_prefill_tokens += seq->num_remaining();
  for (const Sequence* seq : running_) {
    s.queued_prefill_tokens += std::max(0, seq->prompt_len - seq->num_computed);
  }
  return s;
}

absl::StatusOr<GenerateResult> Engine::Generate(std::span<const std::int32_t> prompt,
                                                const SamplingParams& params,
                                                const std::string& request_id) {
  if (HasPendingWork()) {
    return absl::FailedPreconditionError("Generate needs an idle engine; use AddRequest/Step");
  }
  TANDEM_RETURN_IF_ERROR(AddRequest(request_id, prompt, params));
  GenerateResult result;
  while (HasPendingWork()) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<StepOutput> outs, Step());
    for (StepOutput& out : outs) {
      result.tokens.insert(result.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      result.prompt_tokens = out.prompt_tokens;
      result.cached_tokens = out.cached_tokens;
      if (out.finish_reason == FinishReason::kError) {
        return absl::InternalError(absl::StrCat("generation failed: ", out.error));
      }
      if (out.finished) result.finish_reason = out.finish_reason;
    }
  }
  return result;
}

}  // namespace tandem::engine
