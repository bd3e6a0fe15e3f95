// Prefix caching: a hash chain over full blocks of prompt tokens (parent
// hash, the block's ids, the model fingerprint) indexes published caches.
// A hit forks the cached prefix with clone() + trim(): O(blocks) metadata on
// a paged store (copy-on-write blocks), a copy on the contiguous one.
// Unreferenced entries are evicted least recently used first. Every call
// takes a scope (a LoRA adapter's key, 0 for the base model): the same tokens
// under another scope are another prefix, so K/V never leaks between adapters.
//
// Exact mode (models with recurrent layers, whose state cannot be trimmed):
// an entry is found only by its whole length, so a fork never trims.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kv/cache.h"

namespace ingot::engine {

constexpr int64_t kPrefixBlockTokens = 16;

class PrefixCache {
 public:
  PrefixCache(uint64_t model_fingerprint, int64_t block_tokens = kPrefixBlockTokens, bool exact = false);
  bool exact() const { return exact_; }

  // Chain hashes of the full blocks of `tokens`.
  std::vector<uint64_t> chain(const std::vector<int32_t>& tokens, int64_t limit, uint64_t scope = 0) const;

  struct Hit {
    int64_t tokens = 0;  // reusable prefix length (a multiple of the block size)
    uint64_t entry = 0;  // 0: miss
  };
  // Longest cached prefix of tokens[0, limit).
  Hit lookup(const std::vector<int32_t>& tokens, int64_t limit, uint64_t scope = 0) const;
  // A private cache holding the first hit.tokens positions; touches the entry.
  std::unique_ptr<kv::SequenceCache> fork(const Hit& hit);

  bool contains_chain(const std::vector<int32_t>& tokens, int64_t n_tokens, uint64_t scope = 0) const;
  // Publishes the first `tokens` positions (rounded down to full blocks) of
  // `cache`, which holds at least that many, as an entry of `entry_bytes`.
  // Returns the new entry's cache (exactly those positions), or null when
  // that prefix was already cached.
  const kv::SequenceCache* publish(const std::vector<int32_t>& tokens, int64_t n_tokens,
                                   const kv::SequenceCache& cache, int64_t entry_bytes, uint64_t scope = 0);

  // Keeps the entry holding the first `n_tokens` (whole blocks) of `tokens`
  // in preference to unpinned ones until `until`.
  using Clock = std::chrono::steady_clock;
  void pin(const std::vector<int32_t>& tokens, int64_t n_tokens, Clock::time_point until, uint64_t scope = 0);

  // Evicts the least recently used entry, unpinned ones first; false when
  // empty. `keep` is evicted only when it is the last one.
  bool evict_one(uint64_t keep = 0);
  void clear();

  int64_t bytes() const { return bytes_; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  int64_t block_tokens() const { return block_; }
  int64_t evictions() const { return evictions_; }  // by evict_one()

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // the prefix, to rule out hash collisions
    uint64_t scope = 0;
    std::vector<uint64_t> hashes;
    std::unique_ptr<kv::SequenceCache> cache;
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
    Clock::time_point pinned_until{};
  };
  void erase(uint64_t id);

  uint64_t fingerprint_;
  int64_t block_;
  bool exact_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;
  // Block hash -> (entry, blocks of that entry covered by the hash).
  std::unordered_map<uint64_t, std::pair<uint64_t, int64_t>> index_;
  std::list<uint64_t> lru_;  // front: most recent
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace ingot::engine
