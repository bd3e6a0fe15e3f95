// Greedy decode steps replayed from a captured device graph.
//
// The first step of a batch of sequences is captured (forward, argmax, and
// the bump of positions and key counts, all in device memory); every later
// token replays that graph as one launch and reads back only the token ids.
// Works when the model honours BatchInput::step, its caches can reserve fixed
// storage, and the model's backend captures steps (CUDA); create() returns
// nullptr otherwise so callers fall back to plain forward().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/model.h"

namespace ingot {

class GreedyStepGraph {
 public:
  // `caches` (one per sequence, the batch-size bucket) get fixed storage for
  // `max_tokens` positions each.
  static std::unique_ptr<GreedyStepGraph> create(Model& model, std::vector<kv::SequenceCache*> caches,
                                                 int64_t max_tokens);
  ~GreedyStepGraph();
  // Feeds one token per sequence at each cache's current offset; returns the
  // greedy next token of each. The first call captures the graph.
  std::vector<int32_t> step(const std::vector<int32_t>& tokens);
  // Feeds the tokens the previous step returned, without uploading them.
  std::vector<int32_t> next();
  // n steps like next(), queued back to back with no wait in between; the
  // tokens come back in one read at the end: result[i] = sequence i's n tokens.
  std::vector<std::vector<int32_t>> next_n(int64_t n);
  int64_t batch() const { return static_cast<int64_t>(caches_.size()); }

 private:
  GreedyStepGraph(Model& model, std::vector<kv::SequenceCache*> caches, int64_t max_tokens);
  void upload_positions();
  std::vector<int32_t> run();
  void replay_once();

  Model& model_;
  std::vector<kv::SequenceCache*> caches_;
  int64_t max_tokens_;
  StepInputs in_;
  BatchInput batch_;
  Tensor logits_, next_ids_;  // outputs the graph writes (kept alive for its lifetime)
  // Every generated id by position: sequence i's token for position p is at
  // i * max_tokens + p; hist_rows_ holds each sequence's next slot.
  Tensor history_, hist_rows_;
  std::unique_ptr<StepGraph> graph_;  // declared last: destroyed before the buffers it uses
};

}  // namespace ingot
