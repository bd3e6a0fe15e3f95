// A tensor-parallel model: N rank models, each built by its family from its
// shard of the weights and joined by a collective after every row-parallel
// linear. To the engine it is one Model; each sequence's cache is a
// ShardedCache holding every rank's slice of the KV heads.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace ingot::parallel {

// A sequence's cache across ranks; layer()/offset() answer for rank 0 (all
// ranks hold the same positions), trim and clone act on every rank.
class ShardedCache final : public kv::SequenceCache {
 public:
  explicit ShardedCache(std::vector<std::unique_ptr<kv::SequenceCache>> shards) : shards_(std::move(shards)) {}
  int num_layers() const override { return shards_[0]->num_layers(); }
  kv::LayerCache& layer(int i) override { return shards_[0]->layer(i); }
  void trim(int64_t n) override {
    for (auto& s : shards_) s->trim(n);
  }
  std::unique_ptr<kv::SequenceCache> clone() const override;
  kv::SequenceCache& shard(int rank) { return *shards_.at(static_cast<size_t>(rank)); }
  int ranks() const { return static_cast<int>(shards_.size()); }

 private:
  std::vector<std::unique_ptr<kv::SequenceCache>> shards_;
};

// Loads `path` (a checkpoint directory or a .gguf file) split over `ranks`
// ranks. opt.device is where every rank runs (the host simulation on CPU).
std::unique_ptr<Model> load_tensor_parallel(const std::string& path, const LoadOptions& opt, int ranks);

}  // namespace ingot::parallel
