// Speculative decoding's two estimates and the choice they drive: how many
// draft tokens a sequence verifies in the next step. A verification of k
// drafts costs k more rows in the forward pass and yields, with per-token
// acceptance a, on average (1 - a^(k+1)) / (1 - a) tokens instead of one;
// the chosen k maximises tokens per unit of step time, and is 0 (plain
// decoding) when no k beats it.
#pragma once
#include <cstdint>

namespace ingot::engine {

// A sequence's chance that its next draft token is accepted, from its recent
// verifications. While the sequence does not speculate the estimate drifts
// back to the prior (the drafter's expected acceptance), so a sequence whose
// drafts stopped paying tries again after a while (its text may have turned
// to copying).
class AcceptanceEstimate {
 public:
  explicit AcceptanceEstimate(double prior = 0.7) : prior_(prior), rate_(prior) {}
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
// Before the rows have varied enough to fit, the slope is `prior_row_cost`
// of a one-row step.
class StepCost {
 public:
  explicit StepCost(double prior_row_cost = 0.5) : prior_(prior_row_cost) {}
  void observe(int64_t rows, double seconds);
  // Cost of one more row relative to a one-row step (slope / (intercept + slope)).
  double row_cost() const;
  // Seconds of a one-row step (0 before any step was seen).
  double one_row_seconds() const;

 private:
  double prior_;
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums
};

// Time a drafter spends per proposed token (exponentially weighted): a
// draft model's forward passes, next to nothing for n-gram lookup.
class DraftCost {
 public:
  void observe(int64_t tokens, double seconds);
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
