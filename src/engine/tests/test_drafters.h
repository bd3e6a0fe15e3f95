// Drafters for speculative-decoding tests: they propose what the model will
// say (from a run without speculation) with random mistakes, so a test sees
// long accepted drafts, rejections at every position and everything between;
// or a fixed list of tokens.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ingot/engine.h"

namespace ingot::testing {

// Proposes the continuation of whichever reference sequence (prompt + its
// plain output) `tokens` is a prefix of, each token replaced by a random one
// with probability `error`; random tokens when none matches.
class ReplayDrafter final : public engine::Drafter {
 public:
  ReplayDrafter(int64_t vocab, double error, uint64_t seed) : vocab_(vocab), error_(error), seed_(seed) {}
  void add(std::vector<int32_t> sequence);
  std::unique_ptr<engine::SequenceDrafter> start() const override;

 private:
  friend class ReplaySequence;
  int64_t vocab_;
  double error_;
  uint64_t seed_;
  mutable std::mutex mu_;
  std::vector<std::vector<int32_t>> refs_;
};

// Always proposes all of `tokens`, whatever k asks (the engine cuts).
class FixedDrafter final : public engine::Drafter {
 public:
  explicit FixedDrafter(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  std::unique_ptr<engine::SequenceDrafter> start() const override;

 private:
  std::vector<int32_t> tokens_;
};

}  // namespace ingot::testing
