#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace ingot::cpu {

namespace {
thread_local bool t_in_pool = false;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  t_in_pool = true;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_ < tasks_); });
    if (stop_) return;
    seen = generation_;
    while (next_ < tasks_) {
      int64_t task = next_++;
      const auto* job = job_;
      lock.unlock();
      (*job)(task);
      lock.lock();
      if (--remaining_ == 0) done_cv_.notify_all();
    }
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (tasks == 1 || workers_.empty() || t_in_pool) {
    for (int64_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  tasks_ = tasks;
  next_ = 0;
  remaining_ = tasks;
  ++generation_;
  cv_.notify_all();
  t_in_pool = true;
  while (next_ < tasks_) {
    int64_t task = next_++;
    lock.unlock();
    fn(task);
    lock.lock();
    --remaining_;
  }
  done_cv_.wait(lock, [&] { return remaining_ == 0; });
  t_in_pool = false;
  job_ = nullptr;
  tasks_ = 0;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  int64_t chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(size()) * 4);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  run(chunks, [&](int64_t c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) fn(b, e);
  });
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> p;
  return p;
}
int g_threads = 0;
std::mutex g_pool_mu;
}  // namespace

ThreadPool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  auto& p = pool_slot();
  if (!p) {
    if (g_threads <= 0) g_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    p = std::make_unique<ThreadPool>(g_threads);
  }
  return *p;
}

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_threads = n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_slot().reset();
}

int num_threads() { return pool().size(); }

}  // namespace ingot::cpu
