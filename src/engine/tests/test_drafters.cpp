#include "test_drafters.h"

#include <algorithm>
#include <random>

namespace ingot::testing {

class ReplaySequence final : public engine::SequenceDrafter {
 public:
  explicit ReplaySequence(const ReplayDrafter& d) : d_(d), rng_(d.seed_) {}
  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int64_t k) override {
    const std::vector<int32_t>* ref = nullptr;
    {
      std::lock_guard<std::mutex> g(d_.mu_);
      for (const auto& r : d_.refs_)
        if (r.size() > tokens.size() && std::equal(tokens.begin(), tokens.end(), r.begin())) ref = &r;
    }
    std::uniform_real_distribution<double> coin(0, 1);
    std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(d_.vocab_ - 1));
    std::vector<int32_t> out;
    for (int64_t i = 0; i < k; ++i) {
      const size_t at = tokens.size() + static_cast<size_t>(i);
      const bool known = ref && at < ref->size();
      out.push_back(known && coin(rng_) >= d_.error_ ? (*ref)[at] : any(rng_));
    }
    return out;
  }

 private:
  const ReplayDrafter& d_;
  std::mt19937_64 rng_;
};

void ReplayDrafter::add(std::vector<int32_t> sequence) {
  std::lock_guard<std::mutex> g(mu_);
  refs_.push_back(std::move(sequence));
}

std::unique_ptr<engine::SequenceDrafter> ReplayDrafter::start() const { return std::make_unique<ReplaySequence>(*this); }

namespace {
class FixedSequence final : public engine::SequenceDrafter {
 public:
  explicit FixedSequence(const std::vector<int32_t>& t) : t_(t) {}
  std::vector<int32_t> propose(const std::vector<int32_t>&, int64_t) override { return t_; }

 private:
  std::vector<int32_t> t_;
};
}  // namespace

std::unique_ptr<engine::SequenceDrafter> FixedDrafter::start() const { return std::make_unique<FixedSequence>(tokens_); }

}  // namespace ingot::testing
