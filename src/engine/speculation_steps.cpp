// The scheduler's side of speculative decoding: before a forward pass each
// decoding sequence may get draft tokens, verified in that pass as extra rows
// of its decode row; after it the rows are sampled in order and the draft is
// kept up to the first token the model would not have chosen itself.
//
// Exactness: row r's logits are those plain decoding would compute after the
// same tokens (the kernels give a row the same bits alone or in a block), and
// each row goes through the sequence's own sampler exactly as a plain step
// would: the same processors, constraint state and random draw (draw n of a
// request is uniform(seed, n)). A draft token is kept when the sampled token
// equals it. For greedy rows that is plain decoding token for token; for
// sampled rows it is the rejection rule for a point-mass draft (the draft
// token kept with its target probability, on rejection a token from the
// target distribution without it), with the seeded draws of plain decoding,
// so a seeded request gives the same tokens with or without speculation.
#include <algorithm>
#include <chrono>

#include "engine/engine_impl.h"
#include "kv/kinds.h"
#include "util/log.h"

namespace ingot::engine {

bool EngineImpl::drafter_call(Sequence& s, const std::function<void()>& call) {
  try {
    call();
    return true;
  } catch (const std::exception& e) {
    // Drafts only save time: the sequence goes on decoding without them.
    log::warn("request ", s.id, ": drafting failed, decoding on without drafts: ", e.what());
    s.drafter.reset();
    s.draft.clear();
    return false;
  }
}

int64_t EngineImpl::draft_room(const Sequence& s) const {
  if (!s.drafter) return 0;
  // The model's own token after the drafts must still fit max_tokens.
  int64_t room = s.req.stop.max_tokens - s.generated - 1;
  room = std::min<int64_t>(room, opt_.num_speculative_tokens > 0 ? opt_.num_speculative_tokens : kMaxSpeculativeTokens);
  if (kind_ == kv::StoreKind::Kv4) {
    // KV4 keeps the open block's rows exact only while it stays open: a draft
    // that filled it and was trimmed back would leave codes where plain
    // decoding reads exact rows. Drafts stay inside the open block.
    const int64_t bs = kv::pool_options(kind_).block_size;
    room = std::min(room, bs - s.computed % bs - 2);
  }
  return std::max<int64_t>(room, 0);
}

void EngineImpl::draft_tokens(const std::vector<Sequence*>& decoding, int64_t* budget) {
  if (!drafter_) return;
  const double row_cost = step_cost_.row_cost(), one_row = step_cost_.one_row_seconds();
  const double draft_cost = one_row > 0 ? draft_cost_.seconds_per_token() / one_row : 0;
  auto rows = static_cast<int64_t>(decoding.size());
  for (Sequence* s : decoding) {
    s->draft.clear();
    const int64_t room = std::min(draft_room(*s), *budget);
    if (room <= 0) continue;
    const int64_t k = opt_.num_speculative_tokens > 0
                          ? room
                          : choose_draft_length(s->acceptance.rate(), row_cost, draft_cost, rows, room);
    if (k == 0) {
      s->acceptance.idle();
      acceptance_.idle();
      draft_cost_.idle();
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    if (!drafter_call(*s, [&] { s->draft = s->drafter->propose(s->tokens, k); })) continue;
    draft_cost_.observe(k, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (static_cast<int64_t>(s->draft.size()) > k) s->draft.resize(static_cast<size_t>(k));
    // A drafter's ids reach the model only when they are in its vocabulary.
    const int64_t V = model_.vocab_size();
    s->draft.erase(std::find_if(s->draft.begin(), s->draft.end(), [V](int32_t t) { return t < 0 || t >= V; }),
                   s->draft.end());
    // Structured output: draft tokens the constraint would refuse cannot be kept.
    s->draft.resize(s->sampler->admissible_prefix(s->draft));
    rows += static_cast<int64_t>(s->draft.size());
    *budget -= static_cast<int64_t>(s->draft.size());
  }
}

void EngineImpl::verify_draft(Sequence& s, const float* logits, int64_t vocab) {
  const auto k = static_cast<int64_t>(s.draft.size());
  s.draft_tokens += k;
  local_.spec_drafts += 1;
  local_.spec_draft_tokens += k;
  int64_t accepted = 0;
  for (int64_t r = 0; r <= k; ++r) {
    sampling::Sampled t;
    if (!sample_next(s, logits + r * vocab, vocab, &t)) break;
    const bool kept = r < k && t.token == s.draft[static_cast<size_t>(r)];
    if (kept) {
      ++accepted;
      ++s.accepted_draft_tokens;
      ++local_.spec_accepted_tokens;
    }
    emit_token(s, t);
    if (s.state != SeqState::Decoding || !kept) break;
  }
  s.acceptance.record(k, accepted);
  acceptance_.record(k, accepted);
  s.draft.clear();
  if (s.state != SeqState::Decoding) return;  // finished: the cache is gone already
  // The cache holds the decode row and every draft token; keep those accepted.
  s.cache->trim(k - accepted);
  s.computed -= k - accepted;
}

}  // namespace ingot::engine
