#include "engine/speculation.h"

#include <algorithm>
#include <cmath>

namespace ingot::engine {

namespace {
constexpr double kLearn = 0.15;       // weight of the newest verified token
constexpr double kDrift = 0.05;       // pull towards the prior per idle step
constexpr double kDecay = 0.97;       // per observed step (about 30 steps remembered)
constexpr double kMinRowsVar = 0.25;  // rows must vary this much before the fit counts
constexpr double kMargin = 1.05;      // a draft must promise 5 % more tokens per time
constexpr double kDecayDraft = 0.9;   // per drafting call
constexpr double kFadeDraft = 0.98;   // per step that drafts nothing
}  // namespace

void AcceptanceEstimate::record(int64_t drafted, int64_t accepted) {
  for (int64_t i = 0; i < accepted; ++i) rate_ += kLearn * (1.0 - rate_);
  if (accepted < drafted) rate_ -= kLearn * rate_;
}

void AcceptanceEstimate::idle() { rate_ += kDrift * (prior_ - rate_); }

void StepCost::observe(int64_t rows, double seconds) {
  if (!(seconds > 0) || rows <= 0) return;
  const auto x = static_cast<double>(rows);
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * seconds;
  const double mx = x_ / w_, my = y_ / w_;
  const double var = xx_ / w_ - mx * mx;
  // Rows that have not varied lately say nothing of the slope: the last fit stays.
  if (var >= kMinRowsVar) {
    const double slope = (xy_ / w_ - mx * my) / var;
    const double intercept = my - slope * mx;
    fitted_ = !(slope > 0) ? 0.01 : !(intercept > 0) ? 1.0 : std::clamp(slope / (intercept + slope), 0.01, 1.0);
  }
  // A one-row step: the recent mean step scaled by the rows it held.
  one_row_ = my / ((1 - fitted_) + fitted_ * mx);
}

void DraftCost::idle() { per_token_ *= kFadeDraft; }

void DraftCost::observe(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds >= 0)) return;
  const double v = seconds / static_cast<double>(tokens);
  per_token_ = per_token_ == 0 ? v : kDecayDraft * per_token_ + (1 - kDecayDraft) * v;
}

int64_t choose_draft_length(double a, double c, double d, int64_t rows, int64_t max_k) {
  a = std::clamp(a, 0.0, 1.0);
  c = std::clamp(c, 0.0, 1.0);
  d = std::max(d, 0.0);
  const auto r = static_cast<double>(std::max<int64_t>(rows, 1));
  // Step time for R rows, a one-row step being 1: (1 - c) + c R; each draft
  // token adds its row and its drafting.
  auto rate = [&](int64_t k, double expected) {
    return (r - 1 + expected) / ((1 - c) + c * r + (c + d) * static_cast<double>(k));
  };
  const double plain = rate(0, 1.0);
  int64_t best = 0;
  double best_rate = plain * kMargin, expected = 1.0, term = 1.0;
  for (int64_t k = 1; k <= max_k; ++k) {
    term *= a;
    expected += term;  // 1 + a + ... + a^k
    const double v = rate(k, expected);
    if (v > best_rate) {
      best_rate = v;
      best = k;
    }
  }
  return best;
}

}  // namespace ingot::engine
