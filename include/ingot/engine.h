// The public C++ API for embedding ingot: load a model, submit requests,
// receive streamed tokens, cancel. The server is written against this header.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/types.h"

namespace ingot {
class Model;
class LoraAdapter;
}

namespace ingot::engine {

struct Request {
  std::vector<int32_t> prompt;
  std::shared_ptr<const Grammar> grammar;  // null: unconstrained
  SamplingParams sampling;
  StopParams stop;
  bool prompt_logprobs = false;  // /v1/completions echo + logprobs
  bool truncate_prompt = false;  // keep the tail instead of rejecting an over-long prompt
  // Embedding instead of generation: the prompt's final hidden states pooled
  // (not normalised) arrive in the final Chunk::embedding.
  enum class Pooling { None, Last, Mean };
  Pooling pooling = Pooling::None;
  // A LoRA adapter loaded for this engine's model (models/lora.h), applied to
  // this request only; null: the base model. Held until the request finishes.
  std::shared_ptr<const LoraAdapter> lora;
  // false: never speculate for this request, even when the engine does.
  bool speculative = true;
  // > 0: keep this prompt's cached prefix (RAM entry and disk snapshot) in
  // preference to unpinned ones for this many seconds (Anthropic cache_control).
  int64_t cache_pin_seconds = 0;
};

struct TokenEvent {
  int32_t token = 0;
  std::string text;   // new text this token completes (UTF-8 safe; may be empty)
  float logprob = 0;  // when requested
  std::vector<TokenLogprob> top;  // when requested
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // reused from the prefix cache (RAM or disk)
  int64_t cache_written_tokens = 0;  // prompt tokens this request added to the prefix cache
  int64_t completion_tokens = 0;
  // Speculative decoding: draft tokens verified, and those the model kept.
  int64_t draft_tokens = 0;
  int64_t accepted_draft_tokens = 0;
};

// One read from a request's stream: zero or more new tokens, and at the end
// finished = true with the reason (and an error message for Error).
struct Chunk {
  std::vector<TokenEvent> tokens;
  bool finished = false;
  FinishReason reason = FinishReason::None;
  std::string error;
  std::string stop_matched;  // the stop string or "" / the stop token's text
  Usage usage;               // filled on the final chunk
  std::vector<TokenLogprob> prompt_logprobs;  // first chunk, when asked
  std::vector<float> embedding;               // final chunk of an embedding request
};

class RequestHandle {
 public:
  virtual ~RequestHandle() = default;
  // Blocks up to `timeout` for the next chunk; false on timeout.
  virtual bool next(Chunk* out, std::chrono::milliseconds timeout) = 0;
  // Frees the request's KV blocks at the engine's next step; idempotent.
  virtual void cancel() = 0;
};

// Speculative decoding (docs/engine.md): a drafter proposes tokens that may
// follow a sequence; the engine verifies them in one forward pass and keeps
// exactly what the model would have generated itself.
class SequenceDrafter {
 public:
  virtual ~SequenceDrafter() = default;
  // At most `k` tokens that may follow `tokens` (the prompt, then every token
  // generated so far; later calls see it extended, never rewritten).
  virtual std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int64_t k) = 0;
  // Called once the prompt is in the model's cache: a drafter with state of
  // its own (a draft model's cache) reads the prompt here, so that propose()
  // is charged only for drafting.
  virtual void prefill(const std::vector<int32_t>& prompt) { (void)prompt; }
};

// Makes each sequence's drafter (used on the engine thread only).
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::unique_ptr<SequenceDrafter> start() const = 0;
  // Memory a sequence's drafter may hold for `tokens` tokens (a draft
  // model's KV cache); the engine's memory budget counts it.
  virtual int64_t kv_bytes(int64_t tokens) const { (void)tokens; return 0; }
  // The chance that a draft token is kept, assumed before any was verified.
  virtual double expected_acceptance() const { return 0.7; }
};

struct EngineOptions {
  int max_concurrency = 64;         // sequences decoding at once
  int64_t max_queue = 256;          // waiting requests beyond which submit() rejects
  int64_t prefill_chunk = 512;      // tokens of prefill per step
  int64_t token_budget = 2048;      // tokens per step (decode rows + prefill chunks)
  int64_t context_length = 0;       // 0: the model's max_position_embeddings
  double memory_budget_gb = 0;      // 0: no explicit budget (machine memory)
  // Memory of the device the model runs on when that is not this machine's
  // RAM (a GPU's): without an explicit budget the KV room comes from it.
  int64_t device_memory_bytes = 0;
  std::string kv = "paged";         // contiguous | paged | kv8 | kv4
  bool prefix_cache = true;
  int64_t prefix_cache_blocks = 0;  // 0: bounded by the memory budget
  int64_t prefix_cache_entries = 64;  // distinct cached prompts kept (LRU); 0: no count limit
  // Speculative decoding: "off" or "ngram" (prompt lookup). `drafter`, when
  // set, is used instead of the named one (a draft model: DraftModelDrafter).
  std::string speculative = "off";
  std::shared_ptr<const Drafter> drafter;
  // Draft tokens verified per step: a fixed count, or 0 for adaptive (as
  // many as recent acceptance pays for, up to kMaxSpeculativeTokens).
  int num_speculative_tokens = 0;
  // Where tokens are chosen. "auto": on the model's device when that is not
  // the CPU (a batched kernel; only ids and the logprobs asked for reach the
  // host). "batched": that batched row sampler everywhere (on the CPU its
  // host twin). "host": every logits row is copied to the host and sampled
  // there. Rows the batched sampler does not cover (structured output, top-p
  // or min-p without a top-k <= 64, top-k > 64) are sampled on the host.
  std::string sampling = "auto";
  // Decode-only steps over the paged pool replayed from captured device
  // graphs (one per batch size and key bucket). "auto": where the backend
  // captures (CUDA) and the model takes step inputs. "off": every step's
  // kernels launched one by one (vLLM's --enforce-eager). "always": the same
  // step path where nothing is captured too (the CPU runs the step's forward
  // pass directly: what tests of the host side use).
  std::string step_graphs = "auto";
  // The prefix cache's disk tier (docs/kv-cache.md): every published prefix
  // is also written behind to a snapshot file under this folder, and a prompt
  // that extends one restores it, after a restart too. Empty: off. Used with
  // a paged KV kind on the CPU; other setups log why it stays off.
  std::string disk_cache_dir;
  double disk_cache_gb = 10;  // bound on this model's snapshot files (LRU by last use)
  // What a snapshot must match besides the KV layout and scheme: the weights'
  // and the tokenizer's (tokenizer + chat template) fingerprints, and a name
  // for listings.
  std::string disk_cache_model, disk_cache_tokenizer, disk_cache_label;
};

constexpr int kMaxSpeculativeTokens = 16;

// Whether the model's caches can drop rejected draft tokens (a recurrent
// state cannot be rewound, so such models never speculate).
bool can_speculate(const Model& model);

struct Stats {
  int64_t running = 0, waiting = 0;
  int64_t requests_total = 0, requests_rejected = 0;
  int64_t prompt_tokens_total = 0, generated_tokens_total = 0;
  int64_t prefix_hit_tokens = 0, prefix_lookup_tokens = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  double kv_bytes_used = 0;
  int64_t prefix_entries = 0;
  // The shared paged pool (paged kinds only): bytes of blocks held by any
  // sequence or prefix entry, and bytes of blocks allocated at all.
  double kv_pool_used_bytes = 0, kv_pool_allocated_bytes = 0;
  // Speculative decoding: verifications (one per sequence and step that had
  // a draft), draft tokens verified, draft tokens accepted.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  // The prefix cache by tier: requests that reused a prefix and the tokens
  // reused, from RAM and restored from disk; RAM entries evicted.
  int64_t prefix_ram_hits = 0, prefix_ram_hit_tokens = 0;
  int64_t prefix_disk_hits = 0, prefix_disk_hit_tokens = 0;
  int64_t prefix_evictions = 0;
  // The disk tier (zero when off): snapshot files and their bytes, files
  // written, not written (queue full, or a write failed), evicted by the
  // bound, and refused (corrupt, truncated or foreign: deleted).
  bool disk_cache = false;
  int64_t disk_cache_files = 0, disk_cache_bytes = 0;
  int64_t disk_cache_writes = 0, disk_cache_dropped = 0, disk_cache_failed = 0;
  int64_t disk_cache_evictions = 0, disk_cache_refused = 0;
  // Batched steps (one forward pass each), the sequences and tokens they
  // carried, and where their wall time went: scheduling (admission, building
  // the batch), the forward pass (with the batched sampler's token selection;
  // on a GPU this waits for the device), token selection on the host (rows the
  // batched sampler does not take), and handing tokens to the streams (stop
  // checks, detokenizing, draft verification).
  int64_t steps = 0, step_sequences = 0, step_tokens = 0;
  // Steps that went through the replayed decode step, and the graphs it captured.
  int64_t graph_steps = 0, graphs_captured = 0;
  double step_schedule_seconds = 0, step_forward_seconds = 0, step_sample_seconds = 0, step_emit_seconds = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Validates the request (clear InvalidArgument / ResourceExhausted errors)
  // and queues it.
  virtual std::shared_ptr<RequestHandle> submit(Request req) = 0;
  virtual Stats stats() const = 0;
  virtual const Model& model() const = 0;
  // Stops the engine thread; pending requests finish as Cancelled.
  virtual void shutdown() = 0;
};

// The engine owns its thread; `model` must outlive it. `decoder` may be null
// (then TokenEvent::text is empty and stop strings are rejected).
std::unique_ptr<Engine> start_engine(Model& model, const EngineOptions& opt,
                                     std::shared_ptr<const TextDecoder> decoder,
                                     std::vector<int32_t> eos_token_ids);

}  // namespace ingot::engine
