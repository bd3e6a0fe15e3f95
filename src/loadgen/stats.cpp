#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ingot::loadgen {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double median(std::vector<double> v) { return percentile(std::move(v), 50); }

Distribution distribution(const std::vector<double>& v) {
  Distribution d;
  d.count = static_cast<int64_t>(v.size());
  if (v.empty()) return d;
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  d.p50 = percentile(v, 50);
  d.p90 = percentile(v, 90);
  d.p99 = percentile(v, 99);
  return d;
}

int64_t LevelSummary::errors() const { return std::accumulate(failures.begin(), failures.end(), int64_t{0}); }

double tpot_of(const RequestResult& r) {
  if (r.output_tokens < 2 || r.ttft_s < 0) return -1;
  return (r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

LevelSummary summarize(const std::vector<RequestResult>& results, double duration_s, int64_t expected_output_len) {
  constexpr size_t kErrorSamples = 5;
  LevelSummary s;
  s.requests = static_cast<int64_t>(results.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestResult& r : results) {
    if (!r.ok()) {
      ++s.failures[static_cast<size_t>(r.failure)];
      if (s.error_samples.size() < kErrorSamples &&
          std::find(s.error_samples.begin(), s.error_samples.end(), r.error) == s.error_samples.end())
        s.error_samples.push_back(r.error);
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_len;
    s.output_tokens += r.output_tokens;
    if (r.usage_reported) ++s.usage_reported;
    if (r.output_tokens != expected_output_len) ++s.output_len_mismatch;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    if (double t = tpot_of(r); t >= 0) tpot.push_back(t);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2el.push_back(r.latency_s);
  }
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.total_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / duration_s;
  }
  s.ttft = distribution(ttft);
  s.tpot = distribution(tpot);
  s.itl = distribution(itl);
  s.e2el = distribution(e2el);
  return s;
}

namespace {
// When the last sequence got its first token; -inf when one has none yet.
double window_open(const std::vector<std::vector<double>>& arrivals) {
  double open = -std::numeric_limits<double>::infinity();
  for (const auto& a : arrivals) {
    if (a.empty()) return -std::numeric_limits<double>::infinity();
    open = std::max(open, a.front());
  }
  return open;
}
}  // namespace

bool decode_window_full(const std::vector<std::vector<double>>& arrivals, int64_t tokens) {
  if (arrivals.empty()) return false;
  const double open = window_open(arrivals);
  if (std::isinf(open)) return false;
  for (const auto& a : arrivals)
    if (a.end() - std::upper_bound(a.begin(), a.end(), open) < tokens) return false;
  return true;
}

DecodeWindow decode_window(const std::vector<std::vector<double>>& arrivals, int64_t tokens) {
  DecodeWindow w;
  if (arrivals.empty() || tokens < 1) return w;
  const double open = window_open(arrivals);
  if (std::isinf(open)) return w;
  double close = open;
  for (const auto& a : arrivals) {
    // This sequence's next `tokens` tokens (or as many as it has) after the opening.
    auto first = std::upper_bound(a.begin(), a.end(), open);
    const int64_t take = std::min<int64_t>(tokens, a.end() - first);
    if (take == 0) continue;
    w.tokens += take;
    close = std::max(close, *(first + (take - 1)));
  }
  w.seconds = close - open;
  if (!(w.seconds > 0)) w = {};
  return w;
}

}  // namespace ingot::loadgen
