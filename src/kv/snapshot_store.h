// A directory of snapshots for one (model, tokenizer, KV scheme) key: indexed
// at start-up (so snapshots outlive the process), bounded on disk by
// least-recently-used eviction, and written behind by one thread with a
// bounded queue: submit() never waits for the disk (a full queue drops the
// snapshot and counts it). The destructor flushes the queue.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "kv/snapshot.h"

namespace ingot::kv {

class SnapshotStore {
 public:
  struct Entry {
    std::string path;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
  };
  struct Stats {
    int64_t written = 0, dropped = 0, failed = 0, evicted = 0;
  };

  SnapshotStore(std::string dir, SnapshotKey key, uint64_t max_bytes, size_t queue_capacity = 4);
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Publishes `prefix` (its blocks become immutable) and queues it for
  // writing; the clone keeps the blocks alive until written. False if full.
  bool submit(std::unique_ptr<SequenceCache> prefix, std::vector<int32_t> tokens);
  // Waits until every queued snapshot is on disk.
  void flush();

  // The indexed snapshot with the longest token list that prefixes `tokens`.
  std::optional<Entry> longest_prefix(const std::vector<int32_t>& tokens) const;
  // Restores an entry into `pool` and marks it recently used.
  std::unique_ptr<SequenceCache> restore(const Entry& e, Pool& pool);

  size_t size() const;
  uint64_t disk_bytes() const;
  Stats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Job {
    std::unique_ptr<SequenceCache> prefix;
    std::vector<int32_t> tokens;
  };
  void scan();
  void writer_loop();
  void evict_locked();
  std::string path_for(const std::vector<int32_t>& tokens) const;

  std::string dir_;
  SnapshotKey key_;
  uint64_t max_bytes_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  std::vector<Entry> entries_;  // least recently used first
  Stats stats_;
  std::thread writer_;
};

}  // namespace ingot::kv
