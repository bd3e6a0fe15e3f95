#include "parallel/local_group.h"

#include "util/error.h"

namespace ingot::parallel {

class LocalMember final : public Collective {
 public:
  LocalMember(LocalGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size(); }

  Tensor all_reduce_sum(const Tensor& t) override {
    INGOT_CHECK(t.dtype() == DType::F32, "all_reduce_sum expects float32 activations, got ", dtype_name(t.dtype()));
    Tensor in = t.to(Device::CPU).contiguous();
    g_.inputs_[static_cast<size_t>(rank_)] = in.data<float>();
    g_.arrive_and_wait();  // every input published
    Tensor out = Tensor::empty(in.shape(), DType::F32);
    float* o = out.data<float>();
    const int64_t n = in.numel();
    // The same order on every rank, so every rank holds identical bytes.
    for (int64_t i = 0; i < n; ++i) o[i] = g_.inputs_[0][i];
    for (size_t r = 1; r < g_.inputs_.size(); ++r)
      for (int64_t i = 0; i < n; ++i) o[i] += g_.inputs_[r][i];
    g_.arrive_and_wait();  // nobody's input is released while another rank reads it
    return out.to(t.device());
  }

 private:
  LocalGroup& g_;
  int rank_;
};

LocalGroup::LocalGroup(int ranks) : inputs_(static_cast<size_t>(ranks), nullptr) {
  INGOT_CHECK(ranks >= 1, "a group needs at least one rank");
  for (int r = 0; r < ranks; ++r) members_.push_back(std::make_unique<LocalMember>(*this, r));
}

LocalGroup::~LocalGroup() = default;

Collective& LocalGroup::member(int rank) { return *members_.at(static_cast<size_t>(rank)); }

void LocalGroup::arrive_and_wait() {
  std::unique_lock lk(mu_);
  if (aborted_) fail(ErrorKind::Internal, "tensor-parallel group aborted by another rank");
  const uint64_t gen = generation_;
  if (++arrived_ == size()) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) fail(ErrorKind::Internal, "tensor-parallel group aborted by another rank");
}

void LocalGroup::abort() {
  std::lock_guard lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void LocalGroup::reset() {
  std::lock_guard lk(mu_);
  aborted_ = false;
  arrived_ = 0;
}

}  // namespace ingot::parallel
