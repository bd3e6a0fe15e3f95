// A directory of snapshots for one (model, tokenizer, KV scheme) key: indexed
// at start-up (so snapshots outlive the process), bounded on disk by
// least-recently-used eviction, and written behind by one thread with a
// bounded queue: submit() never waits for the disk (a full queue drops the
// snapshot and counts it). The destructor flushes the queue.
//
// A file that can never be restored (corrupt, truncated, another format
// version; in an exclusive directory also another key's) is refused: logged,
// deleted and counted, at start-up or when a restore finds it out.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "kv/snapshot.h"

namespace ingot::kv {

class SnapshotStore {
 public:
  using Clock = std::chrono::system_clock;
  struct Entry {
    std::string path;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    // Kept in preference to unpinned entries until then. Stored as the file's
    // mtime (in the future), so a pin outlives a restart.
    Clock::time_point pinned_until{};
  };
  struct Stats {
    int64_t written = 0, dropped = 0, failed = 0, evicted = 0, refused = 0;
  };

  // `exclusive`: the directory is this key's alone, so another key's file in
  // it is refused rather than left to its owner.
  SnapshotStore(std::string dir, SnapshotKey key, uint64_t max_bytes, size_t queue_capacity = 4,
                bool exclusive = false);
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Publishes `prefix` (its blocks become immutable) and queues it for
  // writing; the clone keeps the blocks alive until written. False if full.
  // `pin_until`: as Entry::pinned_until (a default time point: no pin).
  bool submit(std::unique_ptr<SequenceCache> prefix, std::vector<int32_t> tokens,
              Clock::time_point pin_until = {});
  // Pins the smallest snapshot that starts with `tokens` until `until`;
  // false when there is none.
  bool pin(const std::vector<int32_t>& tokens, Clock::time_point until);
  // Waits until every queued snapshot is on disk.
  void flush();

  // The indexed snapshot with the longest token list that prefixes `tokens`.
  std::optional<Entry> longest_prefix(const std::vector<int32_t>& tokens) const;
  // The indexed snapshot sharing the longest prefix with `tokens`, and that
  // length: whole multiples of `block` (a restore trims the rest), or with
  // block 0 only snapshots that prefix `tokens` entirely (for states that
  // cannot be trimmed). Ties go to the smaller file.
  struct Match {
    Entry entry;
    int64_t tokens = 0;
  };
  std::optional<Match> best_match(const std::vector<int32_t>& tokens, int64_t block) const;
  // Whether a snapshot of exactly `tokens` is indexed.
  bool has(const std::vector<int32_t>& tokens) const;
  // Restores an entry into `pool` and marks it recently used. Null when the
  // file is gone (dropped from the index) or refused (deleted); other errors
  // (no memory) throw and keep the file.
  std::unique_ptr<SequenceCache> restore(const Entry& e, Pool& pool);

  size_t size() const;
  uint64_t disk_bytes() const;
  Stats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Job {
    std::unique_ptr<SequenceCache> prefix;
    std::vector<int32_t> tokens;
    Clock::time_point pin_until;
  };
  void touch_locked(Entry& e);  // sets the file's mtime: the later of now and the pin
  void scan();
  void writer_loop();
  void evict_locked();
  void refuse(const std::string& path, const std::string& why);  // logs, deletes, counts; takes mu_
  void forget_locked(const std::string& path);
  std::string path_for(const std::vector<int32_t>& tokens) const;

  std::string dir_;
  SnapshotKey key_;
  uint64_t max_bytes_;
  size_t capacity_;
  bool exclusive_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  std::vector<Entry> entries_;  // least recently used first
  Stats stats_;
  std::thread writer_;
};

}  // namespace ingot::kv
