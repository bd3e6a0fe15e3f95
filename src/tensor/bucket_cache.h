// A size-bucketed cache of freed blocks over a raw allocator (host memory in
// storage.cpp, device memory in backend/cuda/runtime.cpp): a freed block is
// kept under its rounded size and handed to the next request of that size,
// so decode steps, which allocate the same sizes every token, stop calling
// the raw allocator. Header-only so that the CUDA module carries its own copy.
#pragma once
#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace ingot {

struct BucketStats {
  size_t live_bytes = 0, cached_bytes = 0, peak_bytes = 0;
};

class BucketCache {
 public:
  using RawAlloc = void* (*)(size_t bytes);  // nullptr when out of memory
  using RawFree = void (*)(void* p);

  // Blocks are at least `min_block` bytes; past `max_cached` cached bytes a
  // freed block goes straight back to the raw allocator.
  BucketCache(size_t min_block, size_t max_cached, RawAlloc alloc, RawFree free)
      : min_block_(min_block), max_cached_(max_cached), alloc_(alloc), free_fn_(free) {}
  BucketCache(const BucketCache&) = delete;
  BucketCache& operator=(const BucketCache&) = delete;

  // Rounds to 1/8 of the next power of two (bounded waste, good reuse), and
  // to min_block below 8 * min_block.
  size_t round_up(size_t b) const {
    if (b < min_block_) return min_block_;
    size_t p = min_block_;
    while (p < b) p <<= 1;
    const size_t step = p >= 8 * min_block_ ? p / 8 : min_block_;
    return (b + step - 1) / step * step;
  }

  // A block of round_up(bytes) bytes (its size in *rounded): a cached one,
  // else a fresh one from the raw allocator; nullptr when that has none.
  void* acquire(size_t bytes, size_t* rounded) {
    const size_t r = round_up(bytes);
    *rounded = r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_ += r;
      peak_ = std::max(peak_, live_);
      auto it = free_.find(r);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= r;
        return p;
      }
    }
    void* p = alloc_(r);
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      live_ -= r;
    }
    return p;
  }

  // Takes back a block of `rounded` bytes from acquire().
  void release(void* p, size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_ -= rounded;
      if (cached_ + rounded <= max_cached_) {
        free_.emplace(rounded, p);
        cached_ += rounded;
        return;
      }
    }
    free_fn_(p);
  }

  // Hands every cached block back to the raw allocator.
  void trim() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& b : blocks) free_fn_(b.second);
  }

  BucketStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {live_, cached_, peak_};
  }

 private:
  const size_t min_block_, max_cached_;
  const RawAlloc alloc_;
  const RawFree free_fn_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t live_ = 0, cached_ = 0, peak_ = 0;
};

}  // namespace ingot
