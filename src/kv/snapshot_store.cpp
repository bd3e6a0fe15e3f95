#include "kv/snapshot_store.h"

#include <algorithm>
#include <filesystem>

#include <xxhash.h>

#include "kv/paged.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::kv {

namespace fs = std::filesystem;

SnapshotStore::SnapshotStore(std::string dir, SnapshotKey key, uint64_t max_bytes, size_t queue_capacity,
                             bool exclusive)
    : dir_(std::move(dir)),
      key_(std::move(key)),
      max_bytes_(max_bytes),
      capacity_(std::max<size_t>(1, queue_capacity)),
      exclusive_(exclusive) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) fail(ErrorKind::Io, "snapshot directory ", dir_, " cannot be created");
  scan();
  writer_ = std::thread([this] { writer_loop(); });
}

SnapshotStore::~SnapshotStore() {
  flush();
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

void SnapshotStore::scan() {
  std::vector<std::pair<fs::file_time_type, Entry>> found;
  for (const auto& de : fs::directory_iterator(dir_)) {
    const std::string name = de.path().filename().string();
    if (name.size() > 4 && name[0] == '.' && name.find(".ikv.tmp.") != std::string::npos) {
      std::error_code ec;
      fs::remove(de.path(), ec);  // a write that never finished
      continue;
    }
    if (de.path().extension() != ".ikv") continue;
    try {
      SnapshotInfo info = read_snapshot_info(de.path().string());
      if (!(info.key == key_)) {
        // A shared directory: another model's, not ours to count or evict.
        if (exclusive_) refuse(de.path().string(), "it belongs to another model, tokenizer or KV scheme");
        continue;
      }
      const fs::file_time_type mtime = fs::last_write_time(de.path());
      Entry e{de.path().string(), info.tokens, info.file_bytes};
      // An mtime in the future is a pin (touch_locked).
      const auto ahead = mtime - fs::file_time_type::clock::now();
      if (ahead > fs::file_time_type::duration::zero())
        e.pinned_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(ahead);
      found.push_back({mtime, std::move(e)});
    } catch (const Error& e) {
      refuse(de.path().string(), e.what());  // corrupt or truncated: never restorable
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [t, e] : found) entries_.push_back(std::move(e));
  evict_locked();
}

std::string SnapshotStore::path_for(const std::vector<int32_t>& tokens) const {
  const uint64_t h = XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(int32_t),
                                          XXH3_64bits(key_.model.data(), key_.model.size()));
  return (fs::path(dir_) / str_cat(std::hex, h, "-", std::dec, tokens.size(), ".ikv")).string();
}

bool SnapshotStore::submit(std::unique_ptr<SequenceCache> prefix, std::vector<int32_t> tokens,
                           Clock::time_point pin_until) {
  publish(*prefix);
  std::lock_guard<std::mutex> lk(mu_);
  if (queue_.size() >= capacity_) {
    ++stats_.dropped;
    return false;
  }
  queue_.push_back({std::move(prefix), std::move(tokens), pin_until});
  cv_.notify_all();
  return true;
}

void SnapshotStore::flush() {
  std::unique_lock<std::mutex> lk(mu_);
  idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

void SnapshotStore::writer_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    const std::string path = path_for(job.tokens);
    uint64_t bytes = 0;
    bool ok = true;
    try {
      bytes = write_snapshot(path, *job.prefix, job.tokens, key_);
    } catch (const Error& e) {
      log::warn("snapshot write failed: ", e.what());
      ok = false;
    }
    job.prefix.reset();  // drops the block references
    lk.lock();
    if (ok) {
      ++stats_.written;
      forget_locked(path);
      entries_.push_back({path, std::move(job.tokens), bytes, job.pin_until});
      if (job.pin_until > Clock::now()) touch_locked(entries_.back());
      evict_locked();
    } else {
      ++stats_.failed;
    }
    busy_ = false;
    idle_cv_.notify_all();
  }
}

void SnapshotStore::evict_locked() {
  uint64_t total = 0;
  for (const auto& e : entries_) total += e.bytes;
  const Clock::time_point now = Clock::now();
  // Least recently used first; pinned files only when nothing else is left.
  while (total > max_bytes_ && !entries_.empty()) {
    auto victim = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.pinned_until <= now; });
    if (victim == entries_.end()) victim = entries_.begin();
    std::error_code ec;
    fs::remove(victim->path, ec);
    total -= victim->bytes;
    entries_.erase(victim);
    ++stats_.evicted;
  }
}

void SnapshotStore::touch_locked(Entry& e) {
  std::error_code ec;
  const auto when = std::max(Clock::now(), e.pinned_until);
  fs::last_write_time(e.path, fs::file_time_type::clock::now() + (when - Clock::now()), ec);
}

bool SnapshotStore::pin(const std::vector<int32_t>& tokens, Clock::time_point until) {
  std::lock_guard<std::mutex> lk(mu_);
  Entry* best = nullptr;
  for (auto& e : entries_)
    if (e.tokens.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), e.tokens.begin()) &&
        (!best || e.bytes < best->bytes))
      best = &e;
  if (!best) return false;
  best->pinned_until = std::max(best->pinned_until, until);
  touch_locked(*best);
  return true;
}

void SnapshotStore::refuse(const std::string& path, const std::string& why) {
  log::warn("prompt cache: refused snapshot ", path, " (", why, "); deleted");
  std::error_code ec;
  fs::remove(path, ec);
  std::lock_guard<std::mutex> lk(mu_);
  forget_locked(path);
  ++stats_.refused;
}

void SnapshotStore::forget_locked(const std::string& path) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.path == path; }),
                 entries_.end());
}

std::optional<SnapshotStore::Match> SnapshotStore::best_match(const std::vector<int32_t>& tokens,
                                                              int64_t block) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Entry* best = nullptr;
  int64_t best_n = 0;
  for (const auto& e : entries_) {
    const size_t n = std::min(e.tokens.size(), tokens.size());
    const auto common = static_cast<int64_t>(std::mismatch(e.tokens.begin(), e.tokens.begin() + n, tokens.begin()).first -
                                             e.tokens.begin());
    int64_t usable = 0;
    if (block > 0)
      usable = common / block * block;
    else if (common == static_cast<int64_t>(e.tokens.size()))
      usable = common;
    if (usable > best_n || (usable == best_n && best && usable > 0 && e.bytes < best->bytes)) {
      best = &e;
      best_n = usable;
    }
  }
  if (!best || best_n == 0) return std::nullopt;
  return Match{*best, best_n};
}

bool SnapshotStore::has(const std::vector<int32_t>& tokens) const {
  std::lock_guard<std::mutex> lk(mu_);
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.tokens == tokens; });
}

std::optional<SnapshotStore::Entry> SnapshotStore::longest_prefix(const std::vector<int32_t>& tokens) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Entry* best = nullptr;
  for (const auto& e : entries_)
    if (e.tokens.size() <= tokens.size() && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin()) &&
        (!best || e.tokens.size() > best->tokens.size()))
      best = &e;
  if (!best) return std::nullopt;
  return *best;
}

std::unique_ptr<SequenceCache> SnapshotStore::restore(const Entry& e, Pool& pool) {
  std::unique_ptr<SequenceCache> seq;
  std::vector<int32_t> tokens;
  try {
    seq = restore_snapshot(e.path, pool, key_, &tokens);
  } catch (const Error& err) {
    if (err.kind() == ErrorKind::NotFound) {  // removed behind our back (`ingot cache rm`, another server)
      std::lock_guard<std::mutex> lk(mu_);
      forget_locked(e.path);
      return nullptr;
    }
    if (err.kind() != ErrorKind::BadFormat && err.kind() != ErrorKind::InvalidArgument) throw;
    refuse(e.path, err.what());
    return nullptr;
  }
  if (tokens != e.tokens) {  // replaced by another writer since it was indexed
    refuse(e.path, "its tokens differ from the index");
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return x.path == e.path; });
  if (it != entries_.end()) {
    Entry moved = std::move(*it);
    entries_.erase(it);
    entries_.push_back(std::move(moved));
    touch_locked(entries_.back());  // LRU order survives a restart
  }
  return seq;
}

size_t SnapshotStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

uint64_t SnapshotStore::disk_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t t = 0;
  for (const auto& e : entries_) t += e.bytes;
  return t;
}

SnapshotStore::Stats SnapshotStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace ingot::kv
