// The continuous-batching scheduler (engine thread only). Each step:
// take new requests, drop cancelled ones (their KV goes at once), admit
// waiting requests in arrival order while the memory budget allows, then run
// one forward pass packing a decode row per decoding sequence (with its
// draft tokens when it speculates) plus chunked prefill (oldest first) under
// the token budget.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/engine_impl.h"
#include "engine/memory.h"
#include "ops/ops.h"
#include "sampling/greedy.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::engine {

void EngineImpl::take_incoming() {
  std::lock_guard<std::mutex> g(mu_);
  while (!incoming_.empty()) {
    waiting_.push_back(std::move(incoming_.front()));
    incoming_.pop_front();
  }
}

void EngineImpl::finish(Sequence& s, FinishReason reason, const std::string& error, Chunk c, std::string matched) {
  if (s.state == SeqState::Finished || s.state == SeqState::Cancelled) return;
  const bool was_waiting = s.state == SeqState::Waiting;
  s.state = reason == FinishReason::Cancelled ? SeqState::Cancelled : SeqState::Finished;
  s.cache.reset();
  reserved_ -= s.reserved_bytes;
  s.reserved_bytes = 0;
  c.finished = true;
  c.reason = reason;
  c.error = error;
  c.stop_matched = std::move(matched);
  c.usage.prompt_tokens = s.prompt_len;
  c.usage.cached_prompt_tokens = s.cached_prefix;
  c.usage.cache_written_tokens = s.cache_written;
  c.usage.completion_tokens = s.generated;
  c.usage.draft_tokens = s.draft_tokens;
  c.usage.accepted_draft_tokens = s.accepted_draft_tokens;
  if (!s.first_chunk_sent) c.prompt_logprobs = std::move(s.prompt_logprobs);
  s.first_chunk_sent = true;
  s.ch->push(std::move(c));
  if (was_waiting) {
    std::lock_guard<std::mutex> g(mu_);
    --stats_.waiting;
  }
}

void EngineImpl::reap_cancelled() {
  for (auto& s : running_)
    if (s->ch->cancelled.load()) finish(*s, FinishReason::Cancelled);
  for (auto& s : waiting_)
    if (s->ch->cancelled.load()) finish(*s, FinishReason::Cancelled);
  std::erase_if(running_, [](const auto& s) { return s->state == SeqState::Cancelled || s->state == SeqState::Finished; });
  std::erase_if(waiting_, [](const auto& s) { return s->state == SeqState::Cancelled; });
}

bool EngineImpl::try_admit(Sequence& s) {
  const int64_t total = std::min(context_, s.prompt_len + s.req.stop.max_tokens);
  // Prefix lookup: never the whole prompt (its last position must be computed
  // for logits), and not when every prompt position's logits are wanted.
  PrefixCache::Hit hit;
  const bool use_prefix = prefix_ && !s.req.prompt_logprobs && s.req.pooling != Request::Pooling::Mean;
  if (use_prefix) hit = prefix_->lookup(s.tokens, s.prompt_len - 1, lora_scope(s));
  // The disk tier holds base-model prefixes only (its snapshots are keyed on the model).
  if (use_prefix && disk_ && lora_scope(s) == 0) restore_from_disk(s, hit);
  // Running sequences alone leave no room: no prefix eviction can help.
  if (reserved_ + kv_need(total, hit.tokens) > kv_budget_) return false;
  // Make room by evicting cached prefixes, the one we are about to use last.
  while (prefix_ && prefix_->entries() > 0 && kv_committed() + kv_need(total, hit.tokens) > kv_budget_) {
    prefix_->evict_one(hit.entry);
    if (hit.entry) hit = prefix_->lookup(s.tokens, s.prompt_len - 1, lora_scope(s));
  }
  const int64_t need = kv_need(total, hit.tokens);
  if (kv_committed() + need > kv_budget_) return false;
  if (hit.tokens > 0) {
    s.cache = prefix_->fork(hit);
    s.cached_prefix = hit.tokens;
    s.computed = hit.tokens;
  } else {
    s.cache = fresh_cache();
  }
  if (use_prefix) {
    local_.prefix_lookup_tokens += s.prompt_len;
    local_.prefix_hit_tokens += hit.tokens;
    // The tier that served the prefix: disk when this request restored it.
    if (hit.tokens > 0 && s.disk_restored > 0) {
      ++local_.prefix_disk_hits;
      local_.prefix_disk_hit_tokens += hit.tokens;
    } else if (hit.tokens > 0) {
      ++local_.prefix_ram_hits;
      local_.prefix_ram_hit_tokens += hit.tokens;
    }
  }
  s.reserved_bytes = need;
  reserved_ += need;
  s.state = SeqState::Prefilling;
  return true;
}

void EngineImpl::admit() {
  // Strict arrival order: a large request at the head is not overtaken
  // forever by smaller ones behind it.
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < opt_.max_concurrency) {
    Sequence& s = *waiting_.front();
    if (!try_admit(s)) break;
    {
      std::lock_guard<std::mutex> g(mu_);
      --stats_.waiting;
    }
    local_.prompt_tokens_total += s.prompt_len;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

int64_t EngineImpl::publish_point(const Sequence& s) const {
  return s.prompt_len / prefix_->block_tokens() * prefix_->block_tokens();
}

void EngineImpl::publish_prefix(Sequence& s) {
  if (!prefix_ || s.req.prompt_logprobs) return;
  const int64_t full = publish_point(s);
  // A recurrent state holds exactly what it has seen: publish only at `full`.
  if (recurrent_ && s.computed != full) return;
  const uint64_t scope = lora_scope(s);
  if (full > s.cached_prefix && !prefix_->contains_chain(s.tokens, full, scope)) {
    if (const kv::SequenceCache* entry = publish_entry(s.tokens, full, *s.cache, scope)) {
      s.cache_written = full - s.cached_prefix;
      if (disk_ && scope == 0) write_behind(s, full, *entry);
    }
  }
  if (s.req.cache_pin_seconds > 0) pin_prefix(s, full);
}

void EngineImpl::pin_prefix(const Sequence& s, int64_t full) {
  const auto ttl = std::chrono::seconds(s.req.cache_pin_seconds);
  prefix_->pin(s.tokens, full, PrefixCache::Clock::now() + ttl, lora_scope(s));
  // The snapshot being written carries the pin already (write_behind).
  if (disk_ && lora_scope(s) == 0) disk_->pin({s.tokens.begin(), s.tokens.begin() + full}, kv::SnapshotStore::Clock::now() + ttl);
}

const kv::SequenceCache* EngineImpl::publish_entry(const std::vector<int32_t>& tokens, int64_t full,
                                                   const kv::SequenceCache& cache, uint64_t scope) {
  const int64_t bytes = kv::bytes_for_tokens(layout_, kv_dtype_, kind_, full);
  if (bytes > prefix_cap_bytes_) return nullptr;
  // A pooled entry shares the sequence's blocks (nothing new is held now); a
  // contiguous one is a copy and must fit beside everything reserved.
  auto over_budget = [&] { return !pool_ && reserved_ + prefix_->bytes() + bytes > kv_budget_; };
  const int64_t max_entries = opt_.prefix_cache_entries;
  while (prefix_->entries() > 0 && (over_budget() || prefix_->bytes() + bytes > prefix_cap_bytes_ ||
                                    (max_entries > 0 && prefix_->entries() >= max_entries)))
    prefix_->evict_one();
  if (over_budget()) return nullptr;
  return prefix_->publish(tokens, full, cache, bytes, scope);
}

void EngineImpl::emit_token(Sequence& s, const sampling::Sampled& t) {
  s.tokens.push_back(t.token);
  ++s.generated;
  ++local_.generated_tokens_total;
  sampling::StopResult r = s.stop->push(t.token, s.generated);
  Chunk c;
  TokenEvent ev;
  ev.token = t.token;
  ev.text = std::move(r.text);
  ev.logprob = t.logprob;
  ev.top = t.top;
  c.tokens.push_back(std::move(ev));
  if (!s.first_chunk_sent) {
    c.prompt_logprobs = std::move(s.prompt_logprobs);
    s.first_chunk_sent = true;
  }
  if (r.finished)
    finish(s, r.reason, {}, std::move(c), std::move(r.matched));
  else
    s.ch->push(std::move(c));
}

Tensor EngineImpl::replay_step(const std::vector<kv::SequenceCache*>& caches, const std::vector<int32_t>& tokens) {
  try {
    const int64_t before = decode_steps_->captured();
    Tensor logits = decode_steps_->forward(caches, tokens);
    if (logits.defined()) ++local_.graph_steps;
    local_.graphs_captured += decode_steps_->captured() - before;
    return logits;
  } catch (const std::exception& e) {
    // A step this backend cannot capture or replay runs op by op, from now
    // on (the rows it claimed are claimed again by the plain pass).
    log::warn("decode steps run op by op from now on: ", e.what());
    decode_steps_.reset();
    return {};
  }
}

void EngineImpl::launch_ahead(const std::vector<Sequence*>& rows,
                              const std::vector<std::optional<sampling::Sampled>>& picks) {
  if (!decode_steps_ || !waiting_.empty()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!incoming_.empty()) return;
  }
  for (const auto& s : running_)
    if (s->state != SeqState::Decoding || s->drafter || s->req.lora || s->req.pooling != Request::Pooling::None)
      return;
  AheadStep next;
  std::vector<kv::SequenceCache*> caches;
  std::vector<int32_t> tokens;
  std::vector<Sequence*> ahead;
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& s = *rows[i];
    if (!picks[i] || picks[i]->blocked || s.generated + 1 >= s.req.stop.max_tokens) continue;
    caches.push_back(s.cache.get());
    tokens.push_back(picks[i]->token);
    next.ids.push_back(s.id);
    ahead.push_back(&s);
  }
  if (caches.empty()) return;
  next.logits = replay_step(caches, tokens);
  if (!next.logits.defined()) return;
  // The rows are in the caches now; their tokens join s.tokens when emitted.
  for (Sequence* s : ahead) ++s->computed;
  ++local_.steps;
  local_.step_sequences += static_cast<int64_t>(ahead.size());
  local_.step_tokens += static_cast<int64_t>(ahead.size());
  ahead_ = std::move(next);
}

bool EngineImpl::finish_ahead() {
  AheadStep step = std::move(*ahead_);
  ahead_.reset();
  std::vector<Sequence*> rows;
  std::vector<int64_t> idx;
  for (size_t i = 0; i < step.ids.size(); ++i)
    for (auto& s : running_)
      if (s->id == step.ids[i] && s->state == SeqState::Decoding) {
        rows.push_back(s.get());
        idx.push_back(static_cast<int64_t>(i));
      }
  if (rows.empty()) return false;
  const auto started = std::chrono::steady_clock::now();
  local_.step_schedule_seconds += std::chrono::duration<double>(started - step_started_).count();
  std::vector<std::optional<sampling::Sampled>> picks;
  try {
    const Tensor logits = rows.size() == step.ids.size() ? step.logits : ops::gather_rows(step.logits, idx);
    picks = pick_batched(logits, rows, std::vector<bool>(rows.size(), true));
  } catch (const std::exception& e) {
    for (Sequence* s : rows) finish(*s, FinishReason::Error, e.what());
    return true;
  }
  const auto sampled = std::chrono::steady_clock::now();
  local_.step_forward_seconds += std::chrono::duration<double>(sampled - started).count();
  launch_ahead(rows, picks);
  for (size_t i = 0; i < rows.size(); ++i)
    if (take_pick(*rows[i], *picks[i])) emit_token(*rows[i], *picks[i]);
  local_.step_emit_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - sampled).count();
  return true;
}

void EngineImpl::run_batch() {
  // A step queued ahead is this step: sample and emit it (its rows are
  // already in the caches).
  if (ahead_ && finish_ahead()) return;
  BatchInput in;
  std::vector<Sequence*> rows;  // one per SeqInput
  int64_t budget = opt_.token_budget;
  std::vector<Sequence*> decoding;
  for (auto& s : running_) {
    if (s->state != SeqState::Decoding || budget == 0 || s->req.pooling != Request::Pooling::None) continue;
    decoding.push_back(s.get());
    --budget;
  }
  draft_tokens(decoding, &budget);
  std::vector<int32_t> next;  // a decode row's token and its draft
  for (Sequence* s : decoding) {
    // A draft rides on the decode row: every row's logits are wanted.
    next.assign(1, s->tokens[static_cast<size_t>(s->computed)]);
    next.insert(next.end(), s->draft.begin(), s->draft.end());
    in.add(s->cache.get(), next, next.size() > 1, s->req.lora.get());
    rows.push_back(s);
  }
  for (auto& s : running_) {
    if (s->state != SeqState::Prefilling || budget == 0 || s->req.pooling != Request::Pooling::None) continue;
    int64_t n = std::min({s->prompt_len - s->computed, opt_.prefill_chunk, budget});
    // Recurrent layers: stop the chunk at the publish point, so the prefix is
    // published (cloned) holding exactly its tokens.
    if (recurrent_ && prefix_ && !s->req.prompt_logprobs) {
      const int64_t at = publish_point(*s);
      if (at > s->computed && at < s->computed + n) n = at - s->computed;
    }
    in.add(s->cache.get(), std::span(s->tokens).subspan(static_cast<size_t>(s->computed), static_cast<size_t>(n)),
           s->req.prompt_logprobs, s->req.lora.get());
    rows.push_back(s.get());
    budget -= n;
  }
  if (rows.empty()) return;
  // The rows that pick a token: decoding ones, and prefills whose chunk ends
  // the prompt (unless nothing may be generated).
  std::vector<bool> samples(rows.size());
  bool all_logits = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Sequence& s = *rows[i];
    all_logits = all_logits || in.seqs[i].all_logits;
    samples[i] = s.state == SeqState::Decoding ||
                 (s.computed + in.seqs[i].n_tokens >= s.prompt_len && s.req.stop.max_tokens > 0);
  }
  // Rows that read every logit (prompt logprobs, draft verification) are read
  // on the host: then the whole batch goes there.
  const bool batched = batched_sampling_ && !all_logits;
  Tensor logits;
  std::vector<std::optional<sampling::Sampled>> picks;
  const auto started = std::chrono::steady_clock::now();
  ++local_.steps;
  local_.step_sequences += static_cast<int64_t>(rows.size());
  local_.step_tokens += static_cast<int64_t>(in.tokens.size());
  local_.step_schedule_seconds += std::chrono::duration<double>(started - step_started_).count();
  // A step of decode rows only (no prefill, drafts or adapters) replays its
  // captured graph over the paged stores.
  std::vector<kv::SequenceCache*> caches;
  bool replay = decode_steps_ && rows.size() == decoding.size() && in.tokens.size() == rows.size();
  for (size_t i = 0; replay && i < rows.size(); ++i) {
    replay = in.seqs[i].lora == nullptr;
    caches.push_back(in.seqs[i].cache);
  }
  if (replay) {
    logits = replay_step(caches, in.tokens);
    replay = logits.defined();
  }
  try {
    if (!replay) logits = model_.forward(in);
    if (batched)
      picks = pick_batched(logits, rows, samples);
    else
      logits = logits.to(Device::CPU).contiguous();
  } catch (const std::exception& e) {
    for (Sequence* s : rows) finish(*s, FinishReason::Error, e.what());
    return;
  }
  // The next replayed step goes to the device before these tokens are emitted.
  if (replay && batched) launch_ahead(rows, picks);
  const auto forwarded = std::chrono::steady_clock::now();
  const double forward_seconds = std::chrono::duration<double>(forwarded - started).count();
  local_.step_forward_seconds += forward_seconds;
  // Decode and verification steps teach the cost of a verification row.
  if (drafter_ && rows.size() == decoding.size()) step_cost_.observe(static_cast<int64_t>(in.tokens.size()), forward_seconds);
  const double sampled_before = local_.step_sample_seconds;
  const int64_t V = model_.vocab_size();
  const float* L = batched ? nullptr : logits.data<float>();
  int64_t row = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& s = *rows[i];
    const SeqInput& si = in.seqs[i];
    const int64_t nrows = si.all_logits ? si.n_tokens : 1;
    if (s.state == SeqState::Prefilling && si.all_logits) {
      // Row r predicts prompt position computed + r + 1.
      for (int64_t r = 0; r < si.n_tokens; ++r) {
        const int64_t pos = s.computed + r + 1;
        if (pos >= s.prompt_len) break;
        const float* lr = L + (row + r) * V;
        const float lse = sampling::row_logsumexp(lr, V);
        const int32_t tok = s.tokens[static_cast<size_t>(pos)];
        s.prompt_logprobs.push_back({tok, lr[tok] - lse});
      }
    }
    s.computed += si.n_tokens;
    if (recurrent_ && s.state == SeqState::Prefilling && s.computed < s.prompt_len) publish_prefix(s);
    const float* last = L ? L + (row + nrows - 1) * V : nullptr;
    row += nrows;
    if (s.state == SeqState::Prefilling) {
      if (s.computed < s.prompt_len) continue;
      publish_prefix(s);
      s.state = SeqState::Decoding;
      if (s.drafter) {
        s.acceptance = AcceptanceEstimate(drafter_->expected_acceptance(), acceptance_.rate());
        drafter_call(s, [&] { s.drafter->prefill(s.tokens); });
      }
      if (s.req.stop.max_tokens == 0) {
        finish(s, FinishReason::Length);
        continue;
      }
    }
    if (s.state == SeqState::Decoding && !s.draft.empty()) {
      verify_draft(s, L + (row - nrows) * V, V);
      continue;
    }
    sampling::Sampled t;
    bool picked;
    if (batched) {
      picked = take_pick(s, t = *picks[i]);
    } else {
      const auto at = std::chrono::steady_clock::now();
      picked = sample_next(s, last, V, &t);
      local_.step_sample_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count();
    }
    if (picked) emit_token(s, t);
  }
  // Emitting: the rest of the step, less host sampling (its own phase).
  local_.step_emit_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - forwarded).count() -
                              (local_.step_sample_seconds - sampled_before);
}

bool EngineImpl::sample_next(Sequence& s, const float* logits, int64_t vocab, sampling::Sampled* t) {
  *t = s.sampler->sample(logits, vocab, s.req.stop.max_tokens - s.generated);
  return take_pick(s, *t);
}

bool EngineImpl::take_pick(Sequence& s, const sampling::Sampled& t) {
  if (!t.blocked) return true;
  // The structured text is complete and nothing may follow (no end token to
  // choose), or the constraint found no way on.
  if (s.constraint && s.constraint->complete())
    finish(s, FinishReason::Stop);
  else
    finish(s, FinishReason::Error, "structured output: no token can continue the text");
  return false;
}

// Embedding requests: prefill chunks whose final hidden states are pooled
// (every row for mean pooling, the last row of the last chunk otherwise).
void EngineImpl::run_embeddings() {
  BatchInput in;
  in.hidden_states = true;
  std::vector<Sequence*> rows;
  int64_t budget = opt_.token_budget;
  for (auto& s : running_) {
    if (s->req.pooling == Request::Pooling::None || s->state != SeqState::Prefilling || budget == 0) continue;
    const int64_t n = std::min({s->prompt_len - s->computed, opt_.prefill_chunk, budget});
    in.add(s->cache.get(), std::span(s->tokens).subspan(static_cast<size_t>(s->computed), static_cast<size_t>(n)),
           s->req.pooling == Request::Pooling::Mean, s->req.lora.get());
    rows.push_back(s.get());
    budget -= n;
  }
  if (rows.empty()) return;
  Tensor h;
  try {
    h = model_.forward(in).to(Device::CPU).contiguous();
  } catch (const std::exception& e) {
    for (Sequence* s : rows) finish(*s, FinishReason::Error, e.what());
    return;
  }
  const int64_t H = h.dim(1);
  const float* X = h.data<float>();
  int64_t row = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& s = *rows[i];
    const SeqInput& si = in.seqs[i];
    const int64_t nrows = si.all_logits ? si.n_tokens : 1;
    s.pooled.resize(static_cast<size_t>(H), 0.0f);
    if (s.req.pooling == Request::Pooling::Mean) {
      for (int64_t r = 0; r < nrows; ++r)
        for (int64_t j = 0; j < H; ++j) s.pooled[static_cast<size_t>(j)] += X[(row + r) * H + j];
    } else {
      std::copy(X + (row + nrows - 1) * H, X + (row + nrows) * H, s.pooled.begin());
    }
    row += nrows;
    s.computed += si.n_tokens;
    if (s.computed < s.prompt_len) continue;
    if (s.req.pooling == Request::Pooling::Mean)
      for (float& v : s.pooled) v /= static_cast<float>(s.prompt_len);
    Chunk c;
    c.embedding = std::move(s.pooled);
    finish(s, FinishReason::Stop, {}, std::move(c));
  }
}

void EngineImpl::update_stats() {
  const int64_t block_bytes = std::max<int64_t>(1, kv::bytes_for_tokens(layout_, kv_dtype_, kind_, kPrefixBlockTokens));
  const int64_t used = kv_used_bytes();
  std::lock_guard<std::mutex> g(mu_);
  const int64_t waiting = stats_.waiting, total = stats_.requests_total, rejected = stats_.requests_rejected;
  stats_ = local_;
  stats_.waiting = waiting;
  stats_.requests_total = total;
  stats_.requests_rejected = rejected;
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.kv_bytes_used = static_cast<double>(used);
  stats_.kv_blocks_used = (used + block_bytes - 1) / block_bytes;
  stats_.kv_blocks_total = kv_budget_ / block_bytes;
  stats_.prefix_entries = prefix_ ? prefix_->entries() : 0;
  stats_.kv_pool_used_bytes = pool_ ? static_cast<double>(pool_->used_bytes()) : 0.0;
  stats_.kv_pool_allocated_bytes = pool_ ? static_cast<double>(pool_->allocated_bytes()) : 0.0;
  stats_.prefix_evictions = prefix_ ? prefix_->evictions() : 0;
  disk_stats(stats_);
}

bool EngineImpl::step() {
  const auto started = std::chrono::steady_clock::now();
  take_incoming();
  reap_cancelled();
  admit();
  const bool busy = !running_.empty();
  if (busy) {
    const auto admitted = std::chrono::steady_clock::now();
    run_embeddings();
    step_started_ = std::chrono::steady_clock::now() - (admitted - started);
    run_batch();
  }
  std::erase_if(running_, [](const auto& s) { return s->state == SeqState::Finished || s->state == SeqState::Cancelled; });
  update_stats();
  return busy;
}

std::unique_ptr<Engine> start_engine(Model& model, const EngineOptions& opt, std::shared_ptr<const TextDecoder> decoder,
                                     std::vector<int32_t> eos_token_ids) {
  return std::make_unique<EngineImpl>(model, opt, std::move(decoder), std::move(eos_token_ids));
}

}  // namespace ingot::engine
