// A fixed pool of worker threads for data-parallel kernels. The calling
// thread takes part, so a pool of N runs N-way with N-1 workers.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(task) for task in [0, tasks); returns when all are done.
  // Nested calls from inside a task run serially on the calling thread.
  void run(int64_t tasks, const std::function<void(int64_t)>& fn);

  // Splits [0, n) into contiguous chunks, at least `grain` long.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  // Claims and runs tasks of the current job until none are left.
  void drain();
  std::vector<std::thread> workers_;
  // Workers spin on generation_ for a short while before sleeping on cv_:
  // a decode step issues hundreds of small jobs, each too short for a
  // futex wake-up round trip.
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> remaining_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::mutex run_mu_;  // one job at a time
};

// The process-wide compute pool, sized by set_num_threads (default: cores).
ThreadPool& pool();
void set_num_threads(int n);
int num_threads();

}  // namespace ingot::cpu
