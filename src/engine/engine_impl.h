// Internals of the engine: per-request channels, sequences and the
// scheduler loop that runs on the engine thread.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/prefix_cache.h"
#include "engine/speculation.h"
#include "kv/kinds.h"
#include "kv/pool.h"
#include "kv/snapshot_store.h"
#include "ingot/engine.h"
#include "models/lora.h"
#include "models/model.h"
#include "sampling/sampler.h"
#include "sampling/stop.h"
#include "stepgraph/decode_steps.h"

namespace ingot::engine {

// What the engine thread hands to the HTTP thread reading one request.
class Channel {
 public:
  void push(Chunk c);
  bool pop(Chunk* out, std::chrono::milliseconds timeout);
  std::atomic<bool> cancelled{false};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> q_;
};

enum class SeqState { Waiting, Prefilling, Decoding, Finished, Cancelled };
const char* seq_state_name(SeqState s);

struct Sequence {
  uint64_t id = 0;
  Request req;
  std::shared_ptr<Channel> ch;
  SeqState state = SeqState::Waiting;
  std::unique_ptr<kv::SequenceCache> cache;
  std::vector<int32_t> tokens;  // prompt, then generated
  int64_t prompt_len = 0;
  int64_t computed = 0;          // positions already in the cache
  int64_t cached_prefix = 0;     // reused from the prefix cache
  int64_t cache_written = 0;     // prompt tokens this sequence published to the prefix cache
  int64_t disk_restored = 0;     // prefix tokens restored from the disk tier for this sequence
  int64_t generated = 0;
  int64_t reserved_bytes = 0;    // KV bytes set aside at admission
  std::unique_ptr<TokenConstraint> constraint;  // structured output, when asked
  std::optional<sampling::SequenceSampler> sampler;
  std::optional<sampling::StopChecker> stop;
  std::vector<TokenLogprob> prompt_logprobs;
  bool first_chunk_sent = false;
  std::vector<float> pooled;  // embedding requests: running sum (mean) or last row
  // Speculative decoding (null drafter: this sequence does not speculate).
  std::unique_ptr<SequenceDrafter> drafter;
  AcceptanceEstimate acceptance;
  std::vector<int32_t> draft;  // this step's draft tokens, verified after the forward pass
  int64_t draft_tokens = 0, accepted_draft_tokens = 0;
};

// The prefix-cache scope of a sequence: its adapter's key, 0 for the base model.
inline uint64_t lora_scope(const Sequence& s) { return s.req.lora ? s.req.lora->key() : 0; }

class EngineImpl final : public Engine {
 public:
  EngineImpl(Model& model, const EngineOptions& opt, std::shared_ptr<const TextDecoder> decoder,
             std::vector<int32_t> eos);
  ~EngineImpl() override;
  std::shared_ptr<RequestHandle> submit(Request req) override;
  Stats stats() const override;
  const Model& model() const override { return model_; }
  void shutdown() override;

  void wake() { cv_.notify_all(); }

 private:
  void validate(Request& req) const;
  void loop();
  // One scheduler iteration on the engine thread; false when idle.
  bool step();
  void take_incoming();
  void reap_cancelled();
  void admit();
  bool try_admit(Sequence& s);
  void run_batch();
  // The replayed decode step of `caches` (logits on the device); undefined
  // when these stores cannot be replayed, or when the replay failed (then
  // the engine runs every later step op by op).
  Tensor replay_step(const std::vector<kv::SequenceCache*>& caches, const std::vector<int32_t>& tokens);
  // Launches the next decode step of `rows` (their `picks` not yet emitted)
  // before this step's tokens are streamed, so the device computes it while
  // the host emits: only where that next step is sure to be a replayed
  // decode-only step (nothing waiting or prefilling, no drafts or adapters).
  // Rows its pick finishes by length stay out; a row that stops on a stop
  // string or end token has its extra row dropped with its cache.
  void launch_ahead(const std::vector<Sequence*>& rows, const std::vector<std::optional<sampling::Sampled>>& picks);
  // Samples and emits the step launch_ahead queued, for the rows still
  // decoding; false when none is left (the caller builds a step instead).
  bool finish_ahead();
  void run_embeddings();
  void finish(Sequence& s, FinishReason reason, const std::string& error = {}, Chunk c = {},
              std::string matched = {});
  void publish_prefix(Sequence& s);
  // Publishes the first `full` positions of `cache` in RAM, evicting older
  // entries to fit, under `scope` (prefix_cache.h); the new entry or null
  // (already cached, or no room).
  const kv::SequenceCache* publish_entry(const std::vector<int32_t>& tokens, int64_t full,
                                         const kv::SequenceCache& cache, uint64_t scope = 0);
  // The disk tier (disk_tier.cpp).
  void open_disk_tier();
  // A prefix on disk longer than the RAM hit: restored into the pool and
  // published in RAM, and `hit` looked up again.
  void restore_from_disk(Sequence& s, PrefixCache::Hit& hit);
  // Queues a freshly published RAM entry (the first `full` tokens of `s`) for writing.
  void write_behind(const Sequence& s, int64_t full, const kv::SequenceCache& entry);
  // Keeps the first `full` tokens of `s` cached in RAM and on disk for its pin's time.
  void pin_prefix(const Sequence& s, int64_t full);
  void disk_stats(Stats& st) const;
  int64_t publish_point(const Sequence& s) const;  // prompt tokens a prefix entry covers
  void emit_token(Sequence& s, const sampling::Sampled& t);
  // Samples the sequence's next token from `logits`; false when it finished
  // instead (a constraint left no token).
  bool sample_next(Sequence& s, const float* logits, int64_t vocab, sampling::Sampled* t);
  // A pick made elsewhere (the batched sampler): true to emit it, false when
  // it finished the sequence instead.
  bool take_pick(Sequence& s, const sampling::Sampled& t);
  // Speculative decoding (speculation_steps.cpp). Fills each decoding
  // sequence's draft, taking its rows from `budget`.
  void draft_tokens(const std::vector<Sequence*>& decoding, int64_t* budget);
  // Runs a drafter call; on failure the sequence stops drafting (false).
  bool drafter_call(Sequence& s, const std::function<void()>& call);
  // Most draft tokens the sequence may verify this step.
  int64_t draft_room(const Sequence& s) const;
  // Samples the rows of a verified draft (logits: 1 + draft size rows),
  // emits the tokens the model keeps and drops the rest from the cache.
  void verify_draft(Sequence& s, const float* logits, int64_t vocab);
  // The picks of the batch rows marked in `samples` (batched_sampling.cpp):
  // one batched row-sampler call where the logits are for the rows it covers,
  // the others' rows copied to the host. `logits` holds one row per sequence.
  std::vector<std::optional<sampling::Sampled>> pick_batched(const Tensor& logits, const std::vector<Sequence*>& rows,
                                                             const std::vector<bool>& samples);
  void update_stats();
  // KV accounting (kv_accounting.cpp). What a sequence of `total` tokens,
  // the first `shared` of them forked from a prefix entry, may add at most.
  int64_t kv_need(int64_t total, int64_t shared) const;
  // Bytes held now plus what the running sequences may still add: shared
  // blocks are counted once (the pool's own count) for paged kinds.
  int64_t kv_committed() const;
  // Bytes held now.
  int64_t kv_used_bytes() const;
  std::unique_ptr<kv::SequenceCache> fresh_cache() const;

  Model& model_;
  EngineOptions opt_;
  std::shared_ptr<const TextDecoder> decoder_;
  std::vector<int32_t> eos_;
  int64_t context_ = 0;
  int64_t kv_budget_ = 0;
  int64_t reserved_ = 0;
  std::vector<kv::LayerSpec> layout_;
  bool recurrent_ = false;  // some layer keeps a recurrent state: prefixes publish mid-prefill, exactly
  DType kv_dtype_;
  kv::StoreKind kind_ = kv::StoreKind::Contiguous;
  bool batched_sampling_ = false;  // EngineOptions::sampling resolved
  // Paged kinds: one pool for every sequence and prefix entry, so a freed
  // block is reused by the next sequence and an entry pins only its blocks.
  std::shared_ptr<kv::Pool> pool_;
  // Decode-only steps replayed from captured graphs; null: every step op by op.
  std::unique_ptr<DecodeSteps> decode_steps_;
  // The step launch_ahead queued: its sequences (by id: a row may finish
  // before it is sampled) and their logits, on the device.
  struct AheadStep {
    std::vector<uint64_t> ids;
    Tensor logits;
  };
  std::optional<AheadStep> ahead_;
  std::optional<PrefixCache> prefix_;
  int64_t prefix_cap_bytes_ = 0;
  std::shared_ptr<const Drafter> drafter_;  // null: no speculation
  StepCost step_cost_;
  DraftCost draft_cost_;
  AcceptanceEstimate acceptance_;  // across sequences: where a new sequence's estimate starts
  std::unique_ptr<kv::SnapshotStore> disk_;  // null: no disk tier

  mutable std::mutex mu_;  // incoming_, stats_, stopping_
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  bool stopping_ = false;
  Stats stats_;
  uint64_t next_id_ = 1;

  // Engine-thread state.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  Stats local_;
  // When this step's scheduling began (admission and batch building, not the
  // embedding passes): the start of Stats::step_schedule_seconds.
  std::chrono::steady_clock::time_point step_started_;
  std::thread thread_;
};

}  // namespace ingot::engine
