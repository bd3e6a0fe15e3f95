// N ranks as threads of one process, reducing through host memory: the TP=N
// code path runs (and is tested) on any machine, and it is the reference the
// NCCL group is checked against. A rank that fails aborts the group, so the
// others leave their collective with an error instead of waiting forever.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/collective.h"

namespace ingot::parallel {

class LocalGroup {
 public:
  explicit LocalGroup(int ranks);
  ~LocalGroup();
  int size() const { return static_cast<int>(members_.size()); }
  Collective& member(int rank);
  // Wakes every rank blocked in a collective with an error (until reset()).
  void abort();
  void reset();

 private:
  friend class LocalMember;
  void arrive_and_wait();

  std::vector<std::unique_ptr<Collective>> members_;
  std::vector<const float*> inputs_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

}  // namespace ingot::parallel
