#include "speech/logit_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ingot::speech {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

LogitRules::LogitRules(const WhisperGeneration& gen, int64_t vocab, bool timestamps)
    : gen_(gen), vocab_(vocab), timestamps_(timestamps) {
  if (gen.no_timestamps_id >= 0 && gen.no_timestamps_id + 1 < vocab) ts_begin_ = gen.no_timestamps_id + 1;
}

void LogitRules::apply(float* row, const std::vector<int32_t>& generated) const {
  const int64_t V = vocab_;
  auto suppress = [&](int32_t id) {
    if (id >= 0 && id < V) row[id] = kNegInf;
  };
  auto suppress_range = [&](int64_t a, int64_t b) { std::fill(row + std::max<int64_t>(a, 0), row + std::min(b, V), kNegInf); };
  const bool first = generated.empty();
  for (int32_t id : gen_.suppress_tokens) suppress(id);
  if (first)
    for (int32_t id : gen_.begin_suppress_tokens) suppress(id);
  if (ts_begin_ < 0) return;
  if (!timestamps_) {
    suppress_range(ts_begin_, V);
    return;
  }
  suppress(gen_.no_timestamps_id);
  const size_t n = generated.size();
  const bool last_ts = n >= 1 && is_timestamp(generated[n - 1]);
  const bool penult_ts = n < 2 || is_timestamp(generated[n - 2]);
  const int32_t eos = gen_.eos() >= 0 ? gen_.eos() : ts_begin_;
  if (last_ts) {
    if (penult_ts)
      suppress_range(ts_begin_, V);  // a pair just closed: text (or EOS) must follow
    else
      suppress_range(0, eos);  // an open segment: a timestamp or EOS must follow
  }
  int32_t last_time = -1;
  for (int32_t t : generated)
    if (is_timestamp(t)) last_time = t;
  if (last_time >= 0)  // time never runs backwards
    suppress_range(ts_begin_, last_ts && !penult_ts ? last_time : last_time + 1);
  if (first) {  // a window starts with a timestamp, not too late
    suppress_range(0, ts_begin_);
    suppress_range(ts_begin_ + gen_.max_initial_timestamp_index + 1, V);
  }
  // When the timestamps together are likelier than any single text token, take one
  // (compared as logits: the log-softmax shift is the same on both sides).
  const float text_max = *std::max_element(row, row + ts_begin_);
  const float ts_max = *std::max_element(row + ts_begin_, row + V);
  if (!std::isfinite(ts_max)) return;
  double ts_sum = 0;
  for (int64_t id = ts_begin_; id < V; ++id) ts_sum += std::exp(static_cast<double>(row[id]) - ts_max);
  if (ts_max + std::log(ts_sum) > text_max) suppress_range(0, ts_begin_);
}

void log_softmax_inplace(float* row, int64_t n) {
  const float mx = *std::max_element(row, row + n);
  if (!std::isfinite(mx)) return;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(row[i]) - mx);
  const float lse = mx + static_cast<float>(std::log(s));
  for (int64_t i = 0; i < n; ++i) row[i] -= lse;
}

}  // namespace ingot::speech
