// One long-lived thread per extra rank, so a tensor-parallel step costs a
// wake-up rather than a thread start. run() executes fn(rank) for every rank
// (rank 0 on the caller) and returns when all are done; the first exception
// thrown by any rank is rethrown after the others finish.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot::parallel {

class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  // on_error is called (once, from the failing thread) when a rank throws, so
  // ranks blocked in a collective can be released.
  void run(const std::function<void(int)>& fn, const std::function<void()>& on_error);

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  const std::function<void()>* on_error_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ingot::parallel
