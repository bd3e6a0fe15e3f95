#include "speech/window_decoder.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace ingot::speech {

namespace {

using State = WhisperModel::DecoderState;

// Rows of a [n, vocab] logits tensor as host vectors.
std::vector<std::vector<float>> rows_of(const Tensor& logits) {
  std::vector<float> all = logits.to_f32_vector();
  const int64_t n = logits.dim(0), v = logits.dim(1);
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)].assign(all.begin() + i * v, all.begin() + (i + 1) * v);
  return out;
}

// log of the sum of exp over a row: float exponentials (a decode step's
// bookkeeping runs over the whole vocabulary), summed in double.
double log_sum_exp(const std::vector<float>& row) {
  const float mx = *std::max_element(row.begin(), row.end());
  if (!std::isfinite(mx)) return mx;
  double s = 0;
  for (float v : row) s += std::exp(v - mx);
  return mx + std::log(s);
}

// The k likeliest ids of a row, likeliest first (ties: the lower id first), in one pass.
std::vector<int32_t> top_k(const std::vector<float>& row, size_t k) {
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (size_t i = 0; i < row.size(); ++i) {
    const float v = row[i];
    if (best.size() == k && !(v > row[static_cast<size_t>(best.back())])) continue;
    size_t at = best.size();
    while (at > 0 && v > row[static_cast<size_t>(best[at - 1])]) --at;
    best.insert(best.begin() + static_cast<std::ptrdiff_t>(at), static_cast<int32_t>(i));
    if (best.size() > k) best.pop_back();
  }
  return best;
}

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

int32_t draw(const std::vector<float>& row, float temperature, std::mt19937_64& rng) {
  const float mx = *std::max_element(row.begin(), row.end());
  std::vector<double> p(row.size());
  double s = 0;
  for (size_t i = 0; i < row.size(); ++i) s += (p[i] = std::exp((row[i] - mx) / temperature));
  std::uniform_real_distribution<double> u(0.0, s);
  double x = u(rng), acc = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if ((acc += p[i]) >= x && p[i] > 0) return static_cast<int32_t>(i);
  return argmax(row);
}

// Per sequence, each state moves to the new beam that continues it; a parent
// with several children is copied for all but the last.
std::vector<State> reorder(std::vector<State>& old, const std::vector<size_t>& parent) {
  std::vector<int> left(old.size(), 0);
  for (size_t p : parent) ++left[p];
  std::vector<State> out(parent.size());
  for (size_t i = 0; i < parent.size(); ++i) {
    const size_t p = parent[i];
    out[i] = --left[p] == 0 ? std::move(old[p]) : old[p].clone();
  }
  return out;
}

}  // namespace

double compression_ratio(const std::string& s) {
  if (s.empty()) return 0.0;
  uLongf cap = compressBound(static_cast<uLong>(s.size()));
  std::vector<Bytef> buf(cap);
  if (compress2(buf.data(), &cap, reinterpret_cast<const Bytef*>(s.data()), static_cast<uLong>(s.size()), 9) != Z_OK)
    return 0.0;
  return static_cast<double>(s.size()) / static_cast<double>(cap);
}

double WindowDecoder::score(const Hypothesis& h, const DecodeOptions& opt) const {
  const double len = static_cast<double>(h.tokens.size());
  const double penalty = opt.length_penalty ? std::pow((5.0 + len) / 6.0, *opt.length_penalty) : std::max(len, 1.0);
  return h.sum_logprob / penalty;
}

WindowResult WindowDecoder::run(const std::shared_ptr<const WhisperModel::CrossKV>& cross,
                                const std::vector<int32_t>& prompt, size_t sot_index, const DecodeOptions& opt,
                                std::mt19937_64& rng, Dump* dump) const {
  INGOT_CHECK(!prompt.empty() && sot_index < prompt.size());
  int64_t limit = model_.config().max_target_positions - static_cast<int64_t>(prompt.size());
  if (opt.max_new_tokens > 0) limit = std::min(limit, opt.max_new_tokens);
  if (limit < 1) fail(ErrorKind::InvalidArgument, "the prompt leaves no room for decoding");
  State st = model_.start(cross);
  auto rows = rows_of(model_.decode_rows(st, prompt, {static_cast<int64_t>(sot_index),
                                                      static_cast<int64_t>(prompt.size()) - 1}));
  WindowResult r;
  r.temperature = opt.temperature;
  if (gen_.no_speech_id >= 0 && gen_.no_speech_id < static_cast<int32_t>(rows[0].size()))
    r.no_speech_prob = std::exp(rows[0][static_cast<size_t>(gen_.no_speech_id)] - log_sum_exp(rows[0]));
  std::vector<Hypothesis> hyps;
  if (opt.temperature > 0)
    hyps = sample(std::move(st), std::move(rows[1]), limit, std::max(1, opt.best_of), opt.temperature, rng, nullptr);
  else if (opt.beam_size > 1)
    hyps = beam_search(std::move(st), std::move(rows[1]), limit, opt);
  else
    hyps = sample(std::move(st), std::move(rows[1]), limit, 1, 0.0f, rng, dump);
  if (hyps.empty()) hyps.emplace_back();  // every candidate was suppressed: an empty window
  size_t best = 0;
  for (size_t i = 1; i < hyps.size(); ++i)
    if (score(hyps[i], opt) > score(hyps[best], opt)) best = i;
  r.tokens = std::move(hyps[best].tokens);
  r.token_logprobs = std::move(hyps[best].logprobs);
  r.sum_logprob = hyps[best].sum_logprob;
  std::vector<int32_t> text_tokens;
  for (int32_t t : r.tokens)
    if (!rules_.is_timestamp(t)) text_tokens.push_back(t);
  r.text = text_ ? text_(text_tokens) : "";
  r.avg_logprob = r.sum_logprob / static_cast<double>(r.tokens.size() + 1);
  r.compression = compression_ratio(r.text);
  return r;
}

// n sequences from one prompt: greedy (temperature 0, n = 1) or sampled.
std::vector<WindowDecoder::Hypothesis> WindowDecoder::sample(State first, std::vector<float> logits, int64_t limit,
                                                             int n, float temperature, std::mt19937_64& rng,
                                                             Dump* dump) const {
  std::vector<Hypothesis> hyps(static_cast<size_t>(n));
  std::vector<State> states;
  for (int i = 1; i < n; ++i) states.push_back(first.clone());
  states.insert(states.begin(), std::move(first));
  std::vector<std::vector<float>> rows(static_cast<size_t>(n), logits);
  std::vector<size_t> active(static_cast<size_t>(n));
  std::iota(active.begin(), active.end(), 0);
  for (int64_t step = 0; step < limit && !active.empty(); ++step) {
    std::vector<size_t> still;
    std::vector<int32_t> next;
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t i = active[k];
      std::vector<float>& row = rows[k];
      if (dump) dump->step_logits.insert(dump->step_logits.end(), row.begin(), row.end());
      rules_.apply(row.data(), hyps[i].tokens);
      const int32_t tok = temperature > 0 ? draw(row, temperature, rng) : argmax(row);
      const double lp = row[static_cast<size_t>(tok)] - log_sum_exp(row);
      if (std::isfinite(lp)) hyps[i].sum_logprob += lp;
      if (dump) dump->decoder_ids.push_back(tok);
      if (gen_.is_eos(tok)) continue;
      hyps[i].tokens.push_back(tok);
      hyps[i].logprobs.push_back(static_cast<float>(lp));
      still.push_back(i);
      next.push_back(tok);
    }
    active = std::move(still);
    if (active.empty() || step + 1 == limit) break;
    std::vector<State*> ptrs;
    for (size_t i : active) ptrs.push_back(&states[i]);
    rows = rows_of(model_.decode_step(ptrs, next));
  }
  return hyps;
}

std::vector<WindowDecoder::Hypothesis> WindowDecoder::beam_search(State first, std::vector<float> logits,
                                                                  int64_t limit, const DecodeOptions& opt) const {
  const size_t beam = static_cast<size_t>(opt.beam_size);
  const size_t max_finished = std::max<size_t>(1, static_cast<size_t>(std::lround(opt.beam_size * opt.patience)));
  std::vector<Hypothesis> beams(1), finished;
  std::vector<State> states;
  states.push_back(std::move(first));
  std::vector<std::vector<float>> rows{std::move(logits)};
  for (int64_t step = 0; step < limit; ++step) {
    struct Candidate {
      size_t parent;
      int32_t token;
      double sum_logprob;
      float logprob;
    };
    std::vector<Candidate> cands;
    for (size_t b = 0; b < beams.size(); ++b) {
      std::vector<float>& row = rows[b];
      rules_.apply(row.data(), beams[b].tokens);
      const double lse = log_sum_exp(row);
      // The beam_size + 1 likeliest tokens: enough for beam_size live beams even if one of them is EOS.
      const std::vector<int32_t> ids = top_k(row, beam + 1);
      for (size_t j = 0; j < ids.size(); ++j) {
        const float v = row[static_cast<size_t>(ids[j])];
        if (!std::isfinite(v)) break;
        cands.push_back({b, ids[j], beams[b].sum_logprob + (v - lse), static_cast<float>(v - lse)});
      }
    }
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& c) { return a.sum_logprob > c.sum_logprob; });
    std::vector<Hypothesis> next;
    std::vector<size_t> parents;
    std::vector<int32_t> tokens;
    std::vector<Hypothesis> newly_finished;
    for (const Candidate& c : cands) {
      if (gen_.is_eos(c.token)) {
        newly_finished.push_back({beams[c.parent].tokens, beams[c.parent].logprobs, c.sum_logprob});
        continue;
      }
      Hypothesis h{beams[c.parent].tokens, beams[c.parent].logprobs, c.sum_logprob};
      h.tokens.push_back(c.token);
      h.logprobs.push_back(c.logprob);
      next.push_back(std::move(h));
      parents.push_back(c.parent);
      tokens.push_back(c.token);
      if (next.size() == beam) break;
    }
    for (Hypothesis& h : newly_finished)  // already in order of log-probability
      if (finished.size() < max_finished) finished.push_back(std::move(h));
    if (finished.size() >= max_finished || next.empty() || step + 1 == limit) {
      beams = std::move(next);
      break;
    }
    states = reorder(states, parents);
    std::vector<State*> ptrs;
    for (State& s : states) ptrs.push_back(&s);
    rows = rows_of(model_.decode_step(ptrs, tokens));
    beams = std::move(next);
  }
  // Too few finished: the live beams count as finished, likeliest first.
  std::stable_sort(beams.begin(), beams.end(),
                   [](const Hypothesis& a, const Hypothesis& c) { return a.sum_logprob > c.sum_logprob; });
  for (Hypothesis& h : beams) {
    if (finished.size() >= beam) break;
    finished.push_back(std::move(h));
  }
  return finished;
}

}  // namespace ingot::speech
