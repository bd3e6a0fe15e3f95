// The engine: request validation, the per-request channels, and the engine
// thread that owns the model and every cache.
#include <algorithm>
#include <random>
#include <sstream>

#include "engine/engine_impl.h"
#include "engine/memory.h"
#include "engine/ngram_drafter.h"
#include "kv/kinds.h"
#include "sampling/sampler.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}

const char* seq_state_name(SeqState s) {
  switch (s) {
    case SeqState::Waiting: return "waiting";
    case SeqState::Prefilling: return "prefilling";
    case SeqState::Decoding: return "decoding";
    case SeqState::Finished: return "finished";
    case SeqState::Cancelled: return "cancelled";
  }
  return "?";
}

void Channel::push(Chunk c) {
  {
    std::lock_guard<std::mutex> g(mu_);
    q_.push_back(std::move(c));
  }
  cv_.notify_all();
}

bool Channel::pop(Chunk* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> g(mu_);
  if (!cv_.wait_for(g, timeout, [&] { return !q_.empty(); })) return false;
  // Merge everything already queued into one read (up to the final chunk).
  *out = std::move(q_.front());
  q_.pop_front();
  while (!out->finished && !q_.empty()) {
    Chunk& n = q_.front();
    for (auto& t : n.tokens) out->tokens.push_back(std::move(t));
    if (out->prompt_logprobs.empty()) out->prompt_logprobs = std::move(n.prompt_logprobs);
    out->finished = n.finished;
    out->reason = n.reason;
    out->error = std::move(n.error);
    out->stop_matched = std::move(n.stop_matched);
    out->usage = n.usage;
    if (!n.embedding.empty()) out->embedding = std::move(n.embedding);
    q_.pop_front();
  }
  return true;
}

namespace {

// Handles may outlive the engine (a server thread still holding one), so a
// handle only flips its channel's flag; the engine thread polls the flags at
// every step and at least every 50 ms when idle.
class Handle final : public RequestHandle {
 public:
  explicit Handle(std::shared_ptr<Channel> ch) : ch_(std::move(ch)) {}
  ~Handle() override { cancel(); }
  bool next(Chunk* out, std::chrono::milliseconds timeout) override { return ch_->pop(out, timeout); }
  void cancel() override { ch_->cancelled.store(true); }

 private:
  std::shared_ptr<Channel> ch_;
};

uint64_t fingerprint(const Model& m, const EngineOptions& opt) {
  std::ostringstream os;
  os << m.config().model_type << '|' << m.weight_bytes() << '|' << opt.kv << '|' << static_cast<int>(m.kv_dtype());
  for (const auto& l : m.cache_layout()) os << '|' << l.kv_heads << ',' << l.head_dim << ',' << l.window;
  os << '|' << m.config().vocab_size << ',' << m.config().hidden_size;
  return std::hash<std::string>{}(os.str());
}

}  // namespace

bool can_speculate(const Model& model) {
  const auto layout = model.cache_layout();
  return std::none_of(layout.begin(), layout.end(),
                      [](const kv::LayerSpec& l) { return l.kind == kv::LayerKind::LinearState; });
}

EngineImpl::EngineImpl(Model& model, const EngineOptions& opt, std::shared_ptr<const TextDecoder> decoder,
                       std::vector<int32_t> eos)
    : model_(model), opt_(opt), decoder_(std::move(decoder)), eos_(std::move(eos)) {
  auto bad = [](auto&&... a) { fail(ErrorKind::InvalidArgument, a...); };
  if (opt_.max_concurrency <= 0) bad("max_concurrency must be positive");
  if (opt_.max_queue < 0) bad("max_queue must be >= 0");
  if (opt_.prefill_chunk <= 0) bad("prefill_chunk must be positive");
  if (opt_.token_budget < opt_.max_concurrency)
    bad("token_budget (", opt_.token_budget, ") must cover one decode row per sequence (", opt_.max_concurrency, ")");
  if (opt_.memory_budget_gb < 0) bad("memory budget must be >= 0 GB");
  if (opt_.prefix_cache_blocks < 0) bad("prefix_cache_blocks must be >= 0");
  if (opt_.sampling != "auto" && opt_.sampling != "batched" && opt_.sampling != "host")
    bad("sampling must be auto, batched or host, got '", opt_.sampling, "'");
  batched_sampling_ = opt_.sampling == "batched" || (opt_.sampling == "auto" && model_.device() != Device::CPU);
  if (opt_.step_graphs != "auto" && opt_.step_graphs != "off" && opt_.step_graphs != "always")
    bad("step_graphs must be auto, off or always, got '", opt_.step_graphs, "'");
  context_ = opt_.context_length > 0 ? opt_.context_length : model_.config().max_position_embeddings;
  if (context_ <= 0) bad("context length is unknown: set it explicitly");
  kv_budget_ = kv_budget_bytes(model_, opt_);
  layout_ = model_.cache_layout();
  for (const auto& l : layout_) recurrent_ = recurrent_ || l.kind == kv::LayerKind::LinearState;
  kv_dtype_ = model_.kv_dtype();
  if (opt_.prefix_cache_entries < 0) bad("prefix_cache_entries must be >= 0");
  kind_ = kv::parse_store_kind(opt_.kv);
  // One pool for every sequence and prefix entry (a model that makes its own
  // caches, tensor-parallel ranks, keeps them).
  if (kv::is_paged(kind_) && !model_.make_cache(CacheOptions{opt_.kv, {}}))
    pool_ = kv::Pool::create(layout_, kv_dtype_, model_.device(), kv::pool_options(kind_));
  if (pool_ && opt_.step_graphs != "off") {
    decode_steps_ = DecodeSteps::create(model_);
    if (decode_steps_ && !decode_steps_->captures() && opt_.step_graphs != "always") decode_steps_.reset();
  }
  if (opt_.num_speculative_tokens < 0 || opt_.num_speculative_tokens > kMaxSpeculativeTokens)
    bad("num_speculative_tokens must be in [0, ", kMaxSpeculativeTokens, "] (0: adaptive), got ",
        opt_.num_speculative_tokens);
  if (opt_.drafter)
    drafter_ = opt_.drafter;
  else if (opt_.speculative == "ngram")
    drafter_ = std::make_shared<NgramDrafter>();
  else if (opt_.speculative != "off")
    bad("speculative decoding must be off or ngram, got '", opt_.speculative, "'");
  if (drafter_) acceptance_ = AcceptanceEstimate(drafter_->expected_acceptance());
  if (drafter_ && !can_speculate(model_))
    bad("model type '", model_.config().model_type,
        "' keeps a recurrent state that cannot drop rejected draft tokens: run it without speculative decoding");
  if (opt_.prefix_cache) {
    prefix_.emplace(fingerprint(model_, opt_), kPrefixBlockTokens, recurrent_);
    prefix_cap_bytes_ = opt_.prefix_cache_blocks > 0
                            ? kv::bytes_for_tokens(layout_, kv_dtype_, kind_,
                                                   opt_.prefix_cache_blocks * prefix_->block_tokens())
                            : kv_budget_;
  }
  open_disk_tier();
  stats_.kv_blocks_total =
      kv_budget_ / std::max<int64_t>(1, kv::bytes_for_tokens(layout_, kv_dtype_, kind_, kPrefixBlockTokens));
  local_ = stats_;
  thread_ = std::thread([this] { loop(); });
}

EngineImpl::~EngineImpl() { shutdown(); }

std::unique_ptr<kv::SequenceCache> EngineImpl::fresh_cache() const {
  return pool_ ? pool_->new_sequence() : new_cache(model_, CacheOptions{opt_.kv, {}});
}

void EngineImpl::shutdown() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (disk_) disk_->flush();  // what was published reaches the disk before the process ends
}

void EngineImpl::validate(Request& r) const {
  const int64_t V = model_.vocab_size();
  if (r.prompt.empty()) fail(ErrorKind::InvalidArgument, "the prompt is empty");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= V) fail(ErrorKind::InvalidArgument, "prompt token id ", t, " is out of range (vocabulary size ", V, ")");
  sampling::validate(r.sampling, V);
  if (r.lora) {
    LoraTargets targets;
    if (!model_.lora_targets(targets) || !r.lora->fits(targets))
      fail(ErrorKind::InvalidArgument, "the LoRA adapter ", r.lora->path(), " was not loaded for this model");
  }
  if (r.pooling != Request::Pooling::None) {
    if (!model_.supports_hidden_states())
      fail(ErrorKind::InvalidArgument, "model type '", model_.config().model_type, "' does not produce embeddings");
    if (r.grammar || r.prompt_logprobs) fail(ErrorKind::InvalidArgument, "an embedding request generates nothing");
    r.stop.max_tokens = 0;
  }
  if (r.stop.max_tokens < 0) fail(ErrorKind::InvalidArgument, "max_tokens must be >= 0, got ", r.stop.max_tokens);
  if (r.stop.max_tokens >= context_)
    fail(ErrorKind::InvalidArgument, "max_tokens (", r.stop.max_tokens, ") leaves no room for a prompt in the context (",
         context_, " tokens)");
  for (const auto& s : r.stop.stop_strings) {
    if (s.empty()) fail(ErrorKind::InvalidArgument, "stop strings must not be empty");
    if (!decoder_) fail(ErrorKind::InvalidArgument, "stop strings need a tokenizer, and this engine has none");
  }
  for (int32_t t : r.stop.stop_token_ids)
    if (t < 0 || t >= V) fail(ErrorKind::InvalidArgument, "stop token id ", t, " is out of range (vocabulary size ", V, ")");
  const int64_t P = static_cast<int64_t>(r.prompt.size());
  if (P + r.stop.max_tokens > context_) {
    if (!r.truncate_prompt)
      fail(ErrorKind::InvalidArgument, "the prompt (", P, " tokens) plus max_tokens (", r.stop.max_tokens,
           ") exceeds the context length (", context_, " tokens)");
    r.prompt.erase(r.prompt.begin(), r.prompt.begin() + (P + r.stop.max_tokens - context_));
  }
  const int64_t need = kv_need(static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens, 0);
  if (need > kv_budget_)
    fail(ErrorKind::ResourceExhausted, "the request needs ", need >> 20, " MiB of KV cache but the memory budget leaves ",
         kv_budget_ >> 20, " MiB for it");
}

std::shared_ptr<RequestHandle> EngineImpl::submit(Request req) {
  try {
    validate(req);
  } catch (const Error&) {
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.requests_rejected;
    throw;
  }
  auto s = std::make_unique<Sequence>();
  s->ch = std::make_shared<Channel>();
  auto handle = std::make_shared<Handle>(s->ch);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stopping_) fail(ErrorKind::Internal, "the engine is shut down");
    if (stats_.waiting >= opt_.max_queue) {
      ++stats_.requests_rejected;
      fail(ErrorKind::ResourceExhausted, "the request queue is full (", stats_.waiting, " waiting requests)");
    }
    s->id = next_id_++;
    uint64_t seed = req.sampling.seed ? *req.sampling.seed : std::random_device{}() * 0x100000001ULL + s->id;
    s->prompt_len = static_cast<int64_t>(req.prompt.size());
    s->tokens = req.prompt;
    s->sampler.emplace(req.sampling, seed, req.prompt);
    s->stop.emplace(req.stop, req.stop.ignore_eos ? std::vector<int32_t>{} : eos_, decoder_.get());
    if (req.grammar) {
      s->constraint = req.grammar->start();
      std::vector<int32_t> ends = req.stop.ignore_eos ? std::vector<int32_t>{} : eos_;
      ends.insert(ends.end(), req.stop.stop_token_ids.begin(), req.stop.stop_token_ids.end());
      s->sampler->constrain(s->constraint.get(), std::move(ends));
    }
    if (drafter_ && req.speculative && req.pooling == Request::Pooling::None) s->drafter = drafter_->start();
    s->req = std::move(req);
    ++stats_.waiting;
    ++stats_.requests_total;
    incoming_.push_back(std::move(s));
  }
  cv_.notify_all();
  return handle;
}

Stats EngineImpl::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void EngineImpl::loop() {
  for (;;) {
    bool worked = false;
    try {
      worked = step();
    } catch (const std::exception& e) {
      // A failure outside a forward pass: end every sequence rather than hang.
      log::error("engine step failed: ", e.what());
      for (auto& s : running_) finish(*s, FinishReason::Error, e.what());
      running_.clear();
    }
    std::unique_lock<std::mutex> g(mu_);
    if (stopping_) break;
    if (!worked) cv_.wait_for(g, std::chrono::milliseconds(50), [&] { return stopping_ || !incoming_.empty(); });
    if (stopping_) break;
  }
  // Shutdown: everything still pending ends as Cancelled.
  take_incoming();
  for (auto& s : running_) finish(*s, FinishReason::Cancelled);
  for (auto& s : waiting_) finish(*s, FinishReason::Cancelled);
  running_.clear();
  waiting_.clear();
  if (prefix_) prefix_->clear();
  update_stats();
}

}  // namespace ingot::engine
