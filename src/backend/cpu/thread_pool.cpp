#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace ingot::cpu {

namespace {
thread_local bool t_in_pool = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long an idle thread polls before it blocks. Short: other processes share the cores.
constexpr auto kSpin = std::chrono::microseconds(100);

// Polls pred() for up to kSpin; true when it became true.
template <class Pred>
bool spin_until(Pred pred) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) return false;
  }
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Task indices carry the job's generation in their high bits so that a worker
// still finishing an old job can never claim an index of the next one.
namespace {
constexpr int kIndexBits = 40;
constexpr int64_t kIndexMask = (int64_t{1} << kIndexBits) - 1;
}  // namespace

void ThreadPool::drain() {
  const uint64_t gen = generation_.load(std::memory_order_acquire);
  const std::function<void(int64_t)>* job;
  int64_t tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation_.load() != gen) return;
    job = job_;
    tasks = tasks_;
  }
  if (!job) return;
  const int64_t tag = static_cast<int64_t>(gen & 0xffffff) << kIndexBits;
  while (true) {
    // Compare-and-swap, not fetch_add: a late worker must not consume an
    // index of a newer job that it will then refuse to run.
    int64_t claim = next_.load(std::memory_order_acquire);
    do {
      if ((claim & ~kIndexMask) != tag || (claim & kIndexMask) >= tasks) return;
    } while (!next_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel));
    int64_t task = claim & kIndexMask;
    (*job)(task);
    if (remaining_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  t_in_pool = true;
  uint64_t seen = 0;
  while (true) {
    auto changed = [&] { return stop_.load(std::memory_order_acquire) || generation_.load() != seen; };
    if (!spin_until(changed)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, changed);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    drain();
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (tasks == 1 || workers_.empty() || t_in_pool) {
    for (int64_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> one_job(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    tasks_ = tasks;
    remaining_.store(tasks);
    uint64_t gen = generation_.load() + 1;
    next_.store(static_cast<int64_t>(gen & 0xffffff) << kIndexBits);
    generation_.store(gen, std::memory_order_release);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  t_in_pool = true;
  drain();
  t_in_pool = false;
  if (!spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return remaining_.load() == 0; });
    caller_sleeping_.store(false);
  }
  std::lock_guard<std::mutex> lock(mu_);
  job_ = nullptr;
  tasks_ = 0;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
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
