#include "sampling/greedy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ingot::sampling {

namespace {
constexpr int64_t kTile = 2048;
}

float row_logsumexp(const float* row, int64_t v) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < v; t += kTile) {
    const int64_t e = std::min(v, t + kTile);
    for (int64_t j = t; j < e; ++j) mx = std::max(mx, row[j]);
  }
  // The sum runs in id order across tiles, so the result does not depend on
  // the tile size (and matches the untiled reference bit for bit).
  float sum = 0;
  for (int64_t t = 0; t < v; t += kTile) {
    const int64_t e = std::min(v, t + kTile);
    for (int64_t j = t; j < e; ++j) sum += std::exp(row[j] - mx);
  }
  return mx + std::log(sum);
}

int32_t greedy_token(const float* row, int64_t v, float* logprob) {
  const float lse = row_logsumexp(row, v);
  if (!std::isfinite(lse)) {
    if (logprob) *logprob = lse;
    return 0;
  }
  // Compare the normalised values (row - lse, rounded in f32) tile by tile:
  // rounding may merge neighbours into a tie, which the lowest id wins.
  int64_t best = 0;
  float bestv = row[0] - lse;
  for (int64_t t = 0; t < v; t += kTile) {
    const int64_t e = std::min(v, t + kTile);
    for (int64_t j = std::max<int64_t>(t, 1); j < e; ++j) {
      const float lv = row[j] - lse;
      if (lv > bestv) {
        bestv = lv;
        best = j;
      }
    }
  }
  if (logprob) *logprob = bestv;
  return static_cast<int32_t>(best);
}

std::vector<engine::TokenLogprob> top_logprobs(const float* row, int64_t v, int k, float lse) {
  std::vector<engine::TokenLogprob> out;
  if (k <= 0 || v <= 0) return out;
  k = static_cast<int>(std::min<int64_t>(k, v));
  // A small sorted buffer of the best k seen so far (k is at most ~20).
  auto better = [](const engine::TokenLogprob& a, const engine::TokenLogprob& b) {
    if (a.logprob != b.logprob) return a.logprob > b.logprob;
    return a.token < b.token;
  };
  const bool finite = std::isfinite(lse);
  for (int64_t j = 0; j < v; ++j) {
    engine::TokenLogprob c{static_cast<int32_t>(j), finite ? row[j] - lse : -std::numeric_limits<float>::infinity()};
    if (std::isnan(c.logprob)) c.logprob = -std::numeric_limits<float>::infinity();
    if (static_cast<int>(out.size()) == k && !better(c, out.back())) continue;
    auto it = std::upper_bound(out.begin(), out.end(), c, better);
    out.insert(it, c);
    if (static_cast<int>(out.size()) > k) out.pop_back();
  }
  return out;
}

}  // namespace ingot::sampling
