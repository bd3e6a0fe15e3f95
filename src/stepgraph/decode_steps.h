// The engine's decode steps replayed from captured device graphs, over the
// paged stores of one pool.
//
// A step brings one token per sequence. Its K/V rows go into each
// sequence's own blocks through table handles the kernels read from device
// memory (kv/batched_rows.h StepRows), so one captured forward pass serves
// any sequences of the same count. Counts are padded up to a bucket (1, 2,
// 4, 8, then multiples of 8) with rows that write and read a scratch block
// of their own, so a batch that shrinks or grows by one sequence keeps its
// graph: one graph per (batch bucket, key bucket), captured the first time
// that shape comes and kept, the least recently used dropped beyond a cap. Around each replay the host claims each row
// (a new block, or a private copy of a shared one), uploads ids, positions,
// key counts and handles, and afterwards counts the rows into the stores.
// Logits stay on the device for the batched sampler.
//
// On a backend that does not capture (the CPU) the same step runs the
// forward pass directly, so the host side of a replayed step is tested
// where no GPU is.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "models/model.h"

namespace ingot {

class DecodeSteps {
 public:
  // nullptr when the model does not take step inputs.
  static std::unique_ptr<DecodeSteps> create(Model& model, size_t max_graphs = 8);
  ~DecodeSteps();

  // Whether a step of these caches can run here: every layer a paged,
  // unquantized store read in place, each layer's stores in one pool.
  bool takes(const std::vector<kv::SequenceCache*>& caches) const;
  // Logits [N, vocab] float32 (on the model's device) of tokens[i] fed at
  // caches[i]'s offset; every cache grows by one token. The logits stay
  // valid until the next call. Undefined, with nothing claimed or run, when
  // the step cannot run here (takes() is false).
  Tensor forward(const std::vector<kv::SequenceCache*>& caches, const std::vector<int32_t>& tokens);

  bool captures() const { return captures_; }
  // Step shapes held now (each with its graph where the backend captures),
  // and graphs captured since creation (a shape seen again after it was
  // dropped is captured again).
  int64_t graphs() const { return static_cast<int64_t>(entries_.size()); }
  int64_t captured() const { return captured_; }
  // The key bucket of a step whose longest sequence attends `keys` keys.
  static int64_t key_bucket(int64_t keys);
  // The rows a step of n sequences runs (n plus padding).
  static int64_t batch_bucket(int64_t n);

 private:
  struct Entry;
  DecodeSteps(Model& model, bool captures, size_t max_graphs);
  Entry& entry_for(int64_t n, int64_t max_keys);

  Model& model_;
  bool captures_;
  size_t max_graphs_;
  int64_t captured_ = 0;
  std::list<std::unique_ptr<Entry>> entries_;  // most recently used first
  // The padding rows' sequence: one block per layer of the pool in use,
  // written and read at position 0 by every padding row, never counted.
  std::unique_ptr<kv::SequenceCache> pad_;
};

}  // namespace ingot
