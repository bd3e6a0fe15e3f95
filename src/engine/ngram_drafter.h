// Prompt lookup (n-gram) drafting: the sequence's last n tokens, found
// earlier in the prompt or the output, propose the tokens that followed them
// there. Costs no model: it pays off on text that repeats its input
// (summaries, edits, extraction, code changes) and proposes nothing when the
// ending n-gram is new.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ingot/engine.h"

namespace ingot::engine {

struct NgramOptions {
  int min_ngram = 3;  // shorter endings match too often by chance to be worth verifying
  int max_ngram = 6;
};

// The longest ending n-gram (max_ngram down to min_ngram) that occurs earlier
// in `tokens`, at its most recent occurrence, proposes at most k following
// tokens. A match that runs into the ending itself continues periodically
// (a repeating loop proposes its next period). Empty when nothing matches.
std::vector<int32_t> ngram_draft(const std::vector<int32_t>& tokens, int64_t k, const NgramOptions& opt = {});

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(NgramOptions opt = {});
  std::unique_ptr<SequenceDrafter> start() const override;

 private:
  NgramOptions opt_;
};

}  // namespace ingot::engine
