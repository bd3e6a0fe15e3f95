#include "engine/prefix_cache.h"

#include <algorithm>
#include <initializer_list>

#include "util/error.h"

namespace ingot::engine {

namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}
}  // namespace

PrefixCache::PrefixCache(uint64_t fp, int64_t block, bool exact) : fingerprint_(fp), block_(block), exact_(exact) {
  INGOT_CHECK(block_ > 0);
}

std::vector<uint64_t> PrefixCache::chain(const std::vector<int32_t>& tokens, int64_t limit, uint64_t scope) const {
  std::vector<uint64_t> out;
  uint64_t parent = mix(mix(0x6a09e667f3bcc908ULL, fingerprint_), scope);
  const int64_t n = std::min<int64_t>(limit, static_cast<int64_t>(tokens.size())) / block_;
  for (int64_t b = 0; b < n; ++b) {
    uint64_t h = mix(parent, fingerprint_);
    for (int64_t i = b * block_; i < (b + 1) * block_; ++i) h = mix(h, static_cast<uint32_t>(tokens[i]));
    out.push_back(h);
    parent = h;
  }
  return out;
}

PrefixCache::Hit PrefixCache::lookup(const std::vector<int32_t>& tokens, int64_t limit, uint64_t scope) const {
  auto hashes = chain(tokens, limit, scope);
  for (int64_t b = static_cast<int64_t>(hashes.size()) - 1; b >= 0; --b) {
    auto it = index_.find(hashes[static_cast<size_t>(b)]);
    if (it == index_.end()) continue;
    const Entry& e = entries_.at(it->second.first);
    const int64_t n = (b + 1) * block_;
    if (e.scope != scope || static_cast<int64_t>(e.tokens.size()) < n || !std::equal(tokens.begin(), tokens.begin() + n, e.tokens.begin()))
      continue;  // a hash collision: never reuse what does not match
    return {n, it->second.first};
  }
  return {};
}

std::unique_ptr<kv::SequenceCache> PrefixCache::fork(const Hit& hit) {
  Entry& e = entries_.at(hit.entry);
  lru_.splice(lru_.begin(), lru_, e.lru);
  auto c = e.cache->clone();
  const int64_t extra = c->offset() - hit.tokens;
  INGOT_CHECK(extra >= 0);
  if (extra) c->trim(extra);
  return c;
}

bool PrefixCache::contains_chain(const std::vector<int32_t>& tokens, int64_t n_tokens, uint64_t scope) const {
  const int64_t full = n_tokens / block_ * block_;
  return full == 0 || lookup(tokens, full, scope).tokens == full;
}

const kv::SequenceCache* PrefixCache::publish(const std::vector<int32_t>& tokens, int64_t n_tokens,
                                              const kv::SequenceCache& cache, int64_t entry_bytes, uint64_t scope) {
  const int64_t full = n_tokens / block_ * block_;
  if (full == 0) return nullptr;
  Hit have = lookup(tokens, full, scope);
  if (have.tokens == full) {
    lru_.splice(lru_.begin(), lru_, entries_.at(have.entry).lru);
    return nullptr;
  }
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.begin() + full);
  e.scope = scope;
  e.hashes = chain(tokens, full, scope);
  e.cache = cache.clone();
  const int64_t extra = e.cache->offset() - full;
  INGOT_CHECK(extra >= 0, "published cache is shorter than its prefix");
  if (extra) e.cache->trim(extra);
  e.bytes = entry_bytes;
  const uint64_t id = next_id_++;
  lru_.push_front(id);
  e.lru = lru_.begin();
  for (size_t b = exact_ ? e.hashes.size() - 1 : 0; b < e.hashes.size(); ++b)
    index_[e.hashes[b]] = {id, static_cast<int64_t>(b + 1)};
  bytes_ += e.bytes;
  return entries_.emplace(id, std::move(e)).first->second.cache.get();
}

void PrefixCache::erase(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  for (uint64_t h : it->second.hashes) {
    auto ix = index_.find(h);
    if (ix != index_.end() && ix->second.first == id) index_.erase(ix);
  }
  lru_.erase(it->second.lru);
  bytes_ -= it->second.bytes;
  std::vector<uint64_t> orphaned = std::move(it->second.hashes);
  entries_.erase(it);
  // Blocks this entry shared with an older one stay findable through it.
  for (size_t b = 0; b < orphaned.size(); ++b) {
    if (index_.count(orphaned[b])) continue;
    for (const auto& [oid, e] : entries_)
      if (e.hashes.size() > b && e.hashes[b] == orphaned[b] && (!exact_ || e.hashes.size() == b + 1)) {
        index_[orphaned[b]] = {oid, static_cast<int64_t>(b + 1)};
        break;
      }
  }
}

void PrefixCache::pin(const std::vector<int32_t>& tokens, int64_t n_tokens, Clock::time_point until, uint64_t scope) {
  const int64_t full = n_tokens / block_ * block_;
  if (full == 0) return;
  Hit h = lookup(tokens, full, scope);
  if (h.tokens != full) return;
  Entry& e = entries_.at(h.entry);
  e.pinned_until = std::max(e.pinned_until, until);
}

bool PrefixCache::evict_one(uint64_t keep) {
  if (lru_.empty()) return false;
  ++evictions_;
  const Clock::time_point now = Clock::now();
  // Least recently used first, pinned entries only when nothing else is left:
  // memory for running requests always wins over a pin.
  for (bool pinned_too : {false, true})
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it)
      if (*it != keep && (pinned_too || entries_.at(*it).pinned_until <= now)) {
        erase(*it);
        return true;
      }
  erase(lru_.back());
  return true;
}

void PrefixCache::clear() {
  while (!lru_.empty()) erase(lru_.back());
}

}  // namespace ingot::engine
