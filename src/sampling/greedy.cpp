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

namespace {

// Four-float vectors (GCC / Clang vector extensions: SSE on any x86-64).
typedef float V4 __attribute__((vector_size(16)));
constexpr int kVecs = 4;           // independent accumulators
constexpr int64_t kBlock = 4 * kVecs;
inline V4 splat(float x) { return V4{x, x, x, x}; }
inline V4 load(const float* p) {
  V4 x;
  __builtin_memcpy(&x, p, sizeof x);
  return x;
}

// The pick without the log-sum-exp, where that cannot change it: subtracting
// one value and rounding to f32 never reorders two logits, so the rounded
// log-softmax can only tie (and hand the pick to a lower id) between logits
// within a few ulps of the result's magnitude, which is at most log(v) plus
// lse's own rounding past the max. With no other logit within that margin of
// the max, the max's id is the pick. Returns -1 when the margin holds another
// logit or the row is not finite (NaN, +inf, all -inf): the full rule decides.
int64_t clear_argmax(const float* row, int64_t v) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // The row is 100k+ floats, read once per sampled token: scanned in vectors
  // (lane-wise max, and a lane flag for NaN / +inf, which fail x < inf).
  int64_t j = 0;
  V4 vmax[kVecs], vbad[kVecs];
  for (int k = 0; k < kVecs; ++k) vmax[k] = splat(-kInf), vbad[k] = V4{};
  for (; j + kBlock <= v; j += kBlock)
    for (int k = 0; k < kVecs; ++k) {
      const V4 x = load(row + j + 4 * k);
      vmax[k] = x > vmax[k] ? x : vmax[k];
      vbad[k] = (x < splat(kInf)) ? vbad[k] : splat(1.0f);
    }
  float mx = -kInf;
  bool finite = true;
  for (int k = 0; k < kVecs; ++k)
    for (int l = 0; l < 4; ++l) {
      mx = vmax[k][l] > mx ? vmax[k][l] : mx;
      finite &= vbad[k][l] == 0.0f;
    }
  for (; j < v; ++j) {
    mx = row[j] > mx ? row[j] : mx;
    finite &= row[j] < kInf;
  }
  if (!finite || mx == -kInf) return -1;
  // |x - lse| <= log(v) + 1 + ulp(max) for the logits that matter; two of them
  // a distance g apart round apart once g > 2^-22 of that (see above).
  const double amx = std::fabs(static_cast<double>(mx));
  const double ulp = std::nextafter(static_cast<float>(amx), kInf) - amx;
  const double margin = (std::log(static_cast<double>(v)) + 2.0 + ulp) * std::ldexp(1.0, -22);
  const double thr_d = static_cast<double>(mx) - margin;
  float thr = static_cast<float>(thr_d);
  if (static_cast<double>(thr) > thr_d) thr = std::nextafter(thr, -kInf);  // round down: never fewer candidates
  // Candidates at or above thr: the max itself; any other makes the pick unclear.
  int64_t pick = -1;
  for (j = 0; j + kBlock <= v; j += kBlock) {
    V4 hit{};
    for (int k = 0; k < kVecs; ++k) hit = load(row + j + 4 * k) >= splat(thr) ? splat(1.0f) : hit;
    if (hit[0] + hit[1] + hit[2] + hit[3] == 0.0f) continue;
    for (int64_t i = j; i < j + kBlock; ++i) {
      if (row[i] < thr) continue;
      if (pick >= 0) return -1;
      pick = i;
    }
  }
  for (; j < v; ++j) {
    if (row[j] < thr) continue;
    if (pick >= 0) return -1;
    pick = j;
  }
  return pick;
}

}  // namespace

int32_t greedy_token(const float* row, int64_t v, float* logprob) {
  if (!logprob) {
    const int64_t pick = clear_argmax(row, v);
    if (pick >= 0) return static_cast<int32_t>(pick);
  }
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
