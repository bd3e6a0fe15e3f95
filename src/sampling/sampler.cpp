#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "sampling/greedy.h"
#include "util/error.h"

namespace ingot::sampling {

using engine::SamplingParams;

void validate(const SamplingParams& p, int64_t vocab) {
  auto bad = [](auto&&... a) { fail(ErrorKind::InvalidArgument, a...); };
  if (!std::isfinite(p.temperature) || p.temperature < 0) bad("temperature must be >= 0, got ", p.temperature);
  if (!(p.top_p > 0 && p.top_p <= 1)) bad("top_p must be in (0, 1], got ", p.top_p);
  if (p.top_k < 0) bad("top_k must be >= 0 (0 disables it), got ", p.top_k);
  if (!(p.min_p >= 0 && p.min_p <= 1)) bad("min_p must be in [0, 1], got ", p.min_p);
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    bad("repetition_penalty must be > 0, got ", p.repetition_penalty);
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2))
    bad("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2))
    bad("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    bad("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", p.top_logprobs);
  for (const auto& [id, b] : p.logit_bias) {
    if (id < 0 || id >= vocab) bad("logit_bias token id ", id, " is out of range (vocabulary size ", vocab, ")");
    if (std::isnan(b)) bad("logit_bias for token ", id, " is not a number");
  }
}

double uniform(uint64_t seed, uint64_t step) { return sample_math::uniform(seed, step); }

SequenceSampler::SequenceSampler(const SamplingParams& p, uint64_t seed, const std::vector<int32_t>& prompt)
    : p_(p), seed_(seed) {
  if (p_.repetition_penalty != 1.0f)
    for (int32_t t : prompt) prompt_seen_[t] = 1;
}

bool SequenceSampler::needs_processing() const {
  return !p_.logit_bias.empty() || p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f ||
         p_.frequency_penalty != 0.0f;
}

SampleRow SequenceSampler::row_params() const {
  SampleRow r;
  r.temperature = p_.temperature;
  r.top_k = p_.top_k;
  r.top_p = p_.top_p;
  r.min_p = p_.min_p;
  r.repetition_penalty = p_.repetition_penalty;
  r.presence_penalty = p_.presence_penalty;
  r.frequency_penalty = p_.frequency_penalty;
  r.seed = seed_;
  r.step = step_;
  r.logprob = p_.logprobs || p_.top_logprobs > 0;
  r.top_logprobs = p_.top_logprobs;
  return r;
}

void SequenceSampler::append_edits(std::vector<LogitEdit>& out) const {
  if (!needs_processing()) return;
  std::map<int32_t, LogitEdit> by_id;
  auto at = [&](int32_t id) -> LogitEdit& {
    LogitEdit& e = by_id[id];
    e.id = id;
    return e;
  };
  for (const auto& [id, b] : p_.logit_bias) {
    at(id).has_bias = 1;
    at(id).bias = b;
  }
  const bool repeat = p_.repetition_penalty != 1.0f;
  for (const auto& [id, one] : prompt_seen_) at(id).repeat = repeat;
  for (const auto& [id, n] : output_count_) {
    at(id).count = n;
    at(id).repeat = repeat;
  }
  for (const auto& [id, e] : by_id) out.push_back(e);
}

void SequenceSampler::process(const float* logits, int64_t vocab) {
  work_.assign(logits, logits + vocab);
  edits_.clear();
  append_edits(edits_);
  const SampleRow r = row_params();
  for (const LogitEdit& e : edits_) {
    float& x = work_[static_cast<size_t>(e.id)];
    x = sample_math::apply_edit(x, e, r);
  }
}

int32_t SequenceSampler::draw(int64_t vocab) {
  const float* x = work_.data();
  const float inv_t = 1.0f / p_.temperature;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < vocab; ++j) mx = std::max(mx, x[j]);
  if (!std::isfinite(mx)) return 0;
  // Candidates: all ids, or the top-k by logit (ties: lower id first).
  cand_.resize(static_cast<size_t>(vocab));
  std::iota(cand_.begin(), cand_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return x[a] != x[b] ? x[a] > x[b] : a < b; };
  const bool filtered = p_.top_k > 0 || p_.top_p < 1.0f || p_.min_p > 0.0f;
  if (p_.top_k > 0 && p_.top_k < vocab) {
    std::nth_element(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    cand_.resize(static_cast<size_t>(p_.top_k));
  }
  if (filtered) std::sort(cand_.begin(), cand_.end(), by_logit);
  prob_.resize(cand_.size());
  double sum = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    prob_[i] = sample_math::weight(x[cand_[i]], mx, inv_t);
    sum += prob_[i];
  }
  const int i = sample_math::pick_sorted(prob_.data(), static_cast<int>(cand_.size()), sum, p_.top_p, p_.min_p,
                                         uniform(seed_, step_));
  return cand_[static_cast<size_t>(i)];
}

void SequenceSampler::constrain(engine::TokenConstraint* c, std::vector<int32_t> end_ids) {
  constraint_ = c;
  end_ids_ = std::move(end_ids);
}

void SequenceSampler::apply_constraint(int64_t vocab, int64_t tokens_left) {
  std::vector<float> ends;
  for (int32_t id : end_ids_) ends.push_back(id < vocab ? work_[static_cast<size_t>(id)] : 0.0f);
  constraint_->apply(work_.data(), vocab, tokens_left);
  const bool done = constraint_->complete();
  for (size_t i = 0; i < end_ids_.size(); ++i)
    if (end_ids_[i] < vocab)
      work_[static_cast<size_t>(end_ids_[i])] = done ? ends[i] : -std::numeric_limits<float>::infinity();
}

size_t SequenceSampler::admissible_prefix(const std::vector<int32_t>& draft) const {
  if (!constraint_) return draft.size();
  size_t n = 0;
  while (n < draft.size() && std::find(end_ids_.begin(), end_ids_.end(), draft[n]) == end_ids_.end()) ++n;
  if (n == 0) return 0;
  if (n == draft.size()) return constraint_->allowed_prefix(draft);
  return constraint_->allowed_prefix(std::vector<int32_t>(draft.begin(), draft.begin() + static_cast<std::ptrdiff_t>(n)));
}

Sampled SequenceSampler::sample(const float* logits, int64_t vocab, int64_t tokens_left) {
  Sampled s;
  const bool processed = needs_processing() || constraint_;
  if (processed) {
    if (needs_processing())
      process(logits, vocab);
    else
      work_.assign(logits, logits + vocab);
  }
  if (constraint_) {
    apply_constraint(vocab, tokens_left);
    if (!std::any_of(work_.begin(), work_.begin() + vocab, [](float x) { return x > -std::numeric_limits<float>::infinity(); })) {
      s.token = -1;
      s.blocked = true;
      ++step_;
      return s;
    }
  }
  const float* row = processed ? work_.data() : logits;
  if (p_.temperature == 0.0f) {
    s.token = greedy_token(row, vocab);
  } else {
    if (!processed) work_.assign(logits, logits + vocab);
    s.token = draw(vocab);
  }
  if (p_.logprobs || p_.top_logprobs > 0) {
    const float lse = row_logsumexp(logits, vocab);
    s.logprob = std::isfinite(lse) ? logits[s.token] - lse : -std::numeric_limits<float>::infinity();
    s.top = top_logprobs(logits, vocab, p_.top_logprobs, lse);
  }
  if (constraint_ && std::find(end_ids_.begin(), end_ids_.end(), s.token) == end_ids_.end() &&
      !constraint_->accept(s.token)) {
    s.token = -1;
    s.blocked = true;
  }
  if (s.token >= 0) ++output_count_[s.token];
  ++step_;
  return s;
}

bool SequenceSampler::plan_row(int64_t vocab, SampleRowsPlan& plan) const {
  if (constraint_) return false;
  const bool unfiltered = p_.top_k == 0 && p_.top_p >= 1.0f && p_.min_p <= 0.0f;
  if (p_.temperature != 0.0f && !unfiltered && !(p_.top_k > 0 && p_.top_k <= kSampleMaxTopK)) return false;
  if (vocab > INT32_MAX) return false;
  SampleRow r = row_params();
  r.top_k = p_.temperature == 0.0f ? 0 : static_cast<int32_t>(std::min<int64_t>(p_.top_k, vocab));
  r.edit_begin = static_cast<int32_t>(plan.edits.size());
  append_edits(plan.edits);
  r.edit_count = static_cast<int32_t>(plan.edits.size()) - r.edit_begin;
  plan.rows.push_back(r);
  return true;
}

Sampled SequenceSampler::take(const SampledRows& out, size_t i) {
  INGOT_CHECK(i < out.token.size(), "SequenceSampler::take: row ", i, " of ", out.token.size());
  Sampled s;
  s.token = out.token[i];
  if (p_.logprobs || p_.top_logprobs > 0) {
    s.logprob = out.logprob[i];
    for (int j = 0; j < p_.top_logprobs; ++j) {
      const size_t at = i * kSampleMaxTopLogprobs + static_cast<size_t>(j);
      s.top.push_back({out.top_id[at], out.top_logprob[at]});
    }
  }
  ++output_count_[s.token];
  ++step_;
  return s;
}

}  // namespace ingot::sampling
