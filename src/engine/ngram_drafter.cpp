#include "engine/ngram_drafter.h"

#include "util/error.h"

namespace ingot::engine {

std::vector<int32_t> ngram_draft(const std::vector<int32_t>& tokens, int64_t k, const NgramOptions& opt) {
  std::vector<int32_t> draft;
  const auto L = static_cast<int64_t>(tokens.size());
  if (k <= 0 || L < opt.min_ngram + 1) return draft;
  const int32_t* t = tokens.data();
  // One backward scan: p is where a candidate's continuation starts, so the
  // candidate n-gram ends at p - 1 and must equal the sequence's ending.
  int64_t best_p = -1, best_n = 0;
  for (int64_t p = L - 1; p >= opt.min_ngram; --p) {
    if (t[p - 1] != t[L - 1]) continue;
    int64_t n = 1;
    while (n < opt.max_ngram && n < p && t[p - 1 - n] == t[L - 1 - n]) ++n;
    if (n > best_n && n >= opt.min_ngram) {
      best_n = n;
      best_p = p;
      if (n == opt.max_ngram) break;  // the most recent of the longest kind
    }
  }
  if (best_p < 0) return draft;
  draft.reserve(static_cast<size_t>(k));
  // Past the end of the sequence the match repeats with period L - best_p.
  for (int64_t i = 0; i < k; ++i) {
    const int64_t src = best_p + i;
    draft.push_back(src < L ? t[src] : draft[static_cast<size_t>(src - L)]);
  }
  return draft;
}

namespace {

class NgramSequenceDrafter final : public SequenceDrafter {
 public:
  explicit NgramSequenceDrafter(const NgramOptions& opt) : opt_(opt) {}
  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int64_t k) override {
    return ngram_draft(tokens, k, opt_);
  }

 private:
  NgramOptions opt_;
};

}  // namespace

NgramDrafter::NgramDrafter(NgramOptions opt) : opt_(opt) {
  if (opt_.min_ngram < 1 || opt_.max_ngram < opt_.min_ngram)
    fail(ErrorKind::InvalidArgument, "n-gram drafting needs 1 <= min_ngram <= max_ngram, got ", opt_.min_ngram, " and ",
         opt_.max_ngram);
}

std::unique_ptr<SequenceDrafter> NgramDrafter::start() const { return std::make_unique<NgramSequenceDrafter>(opt_); }

}  // namespace ingot::engine
