#include "parallel/rank_threads.h"

namespace ingot::parallel {

RankThreads::RankThreads(int ranks) {
  for (int r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void RankThreads::loop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock lk(mu_);
      start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(rank);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard lk(mu_);
    if (err) {
      if (!error_) error_ = err;
      (*on_error_)();
    }
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

void RankThreads::run(const std::function<void(int)>& fn, const std::function<void()>& on_error) {
  {
    std::lock_guard lk(mu_);
    job_ = &fn;
    on_error_ = &on_error;
    error_ = nullptr;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  try {
    fn(0);
  } catch (...) {
    {
      std::lock_guard lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
    on_error();
  }
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [&] { return pending_ == 0; });
  // The first failure is the cause; later ones are ranks released by the abort.
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ingot::parallel
