// Megatron-style sharding of a dense decoder over N ranks: which slice of
// every parameter each rank holds, and the per-rank config that slice implies.
//   column-parallel (output rows split): q/k/v projections, gate/up;
//   row-parallel (input columns split):  o_proj, down_proj, followed by an all-reduce;
//   replicated: embeddings, norms, the LM head.
// KV heads are split when num_key_value_heads is a multiple of N, and
// replicated (each rank keeps the one KV head its query heads read) when N is a
// multiple of num_key_value_heads.
#pragma once
#include <cstdint>
#include <string>

#include "io/config.h"

namespace ingot::parallel {

enum class Split {
  Replicated,     // every rank holds the whole tensor
  Rows,           // dim 0 sliced
  Cols,           // dim 1 sliced
  FirstRankOnly,  // rank 0 holds it, the others zeros (biases added after an all-reduce)
};

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class ShardPlan {
 public:
  // Throws InvalidArgument / Unsupported when the model cannot be split n ways.
  ShardPlan(const ModelConfig& full, int ranks);

  int ranks() const { return ranks_; }
  const ModelConfig& full_config() const { return full_; }
  // The config rank `r` builds its model from (same for every rank).
  ModelConfig rank_config() const;

  Split split_of(const std::string& name) const;
  // The slice of `name` (along the dimension split_of names) rank `r` holds.
  Range range_of(const std::string& name, int rank) const;

  static bool supports(const std::string& model_type);

 private:
  ModelConfig full_;
  int ranks_;
};

}  // namespace ingot::parallel
