// Threads that run request handlers off the HTTP event loop. Threads start on
// demand up to a cap and then stay; jobs past the cap wait in arrival order.
// Only requests that reached a handler use a thread: idle and half-open
// connections never do.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot::server {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void submit(std::function<void()> job);
  // Runs every queued job, waits for the running ones and joins the threads.
  void shutdown();
  size_t threads() const;

 private:
  void work();
  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace ingot::server
