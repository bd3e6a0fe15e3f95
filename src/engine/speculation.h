// Speculative decoding's two estimates and the choice they drive: how many
// draft tokens a sequence verifies in the next step. A verification of k
// drafts costs k more rows in the forward pass and yields, with per-token
// acceptance a, on average (1 - a^(k+1)) / (1 - a) tokens instead of one;
// the chosen k maximises tokens per unit of step time, and is 0 (plain
// decoding) when no k beats it.
#pragma once
#include <cstdint>

namespace ingot::engine {

// The chance that the next draft token is accepted, from recent
// verifications: a sequence's own, or the engine's across sequences (where a
// new sequence starts). While no draft is verified the estimate drifts back
// to the prior (the drafter's expected acceptance), so a sequence whose
// drafts stopped paying tries again after a while (its text may have turned
// to copying), and a low engine-wide figure cannot keep new sequences from
// ever drafting.
class AcceptanceEstimate {
 public:
  explicit AcceptanceEstimate(double prior = 0.7) : AcceptanceEstimate(prior, prior) {}
  AcceptanceEstimate(double prior, double start) : prior_(prior), rate_(start) {}
  double rate() const { return rate_; }
  // One verification of `drafted` tokens that kept the first `accepted`:
  // each kept token is a success, and the first rejected one a failure.
  void record(int64_t drafted, int64_t accepted);
  // A step this sequence decoded without a draft it chose not to ask for.
  void idle();

 private:
  double prior_, rate_;
};

// Time of a decode / verification step as intercept + slope × rows, fitted
// online (exponentially weighted least squares over recent steps), so the
// cost of a verification row follows the model, the device and the load.
// Until the rows have varied enough to fit, the slope is `prior_row_cost` of
// a one-row step; while they do not vary, the last fit stays.
class StepCost {
 public:
  explicit StepCost(double prior_row_cost = 0.5) : fitted_(prior_row_cost) {}
  void observe(int64_t rows, double seconds);
  // Cost of one more row relative to a one-row step (slope / (intercept + slope)).
  double row_cost() const { return fitted_; }
  // Seconds of a one-row step (0 before any step was seen).
  double one_row_seconds() const { return one_row_; }

 private:
  double fitted_, one_row_ = 0;
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums
};

// Time a drafter spends per proposed token (exponentially weighted): a
// draft model's forward passes, next to nothing for n-gram lookup. It fades
// on steps that draft nothing, so one slow call (a first touch of the
// weights) cannot stop drafting for good: drafting resumes and is measured
// again.
class DraftCost {
 public:
  void observe(int64_t tokens, double seconds);
  void idle();
  double seconds_per_token() const { return per_token_; }

 private:
  double per_token_ = 0;
};

// The draft length (0..max_k) that maximises tokens per step time for one
// sequence, given its acceptance rate, the relative cost of a row and of
// drafting one token (both in one-row steps), and the rows the step already
// holds (`rows` ≥ 1, this sequence's own decode row included): each of those
// rows yields a token, each draft token costs a row and its drafting.
int64_t choose_draft_length(double accept_rate, double row_cost, double draft_cost, int64_t rows, int64_t max_k);

}  // namespace ingot::engine
