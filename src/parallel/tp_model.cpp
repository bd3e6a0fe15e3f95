#include "parallel/tp_model.h"

#include "models/gguf_source.h"
#include "parallel/local_group.h"
#include "parallel/rank_threads.h"
#include "parallel/shard_plan.h"
#include "parallel/sharded_source.h"
#include "util/error.h"

namespace ingot::parallel {

std::unique_ptr<kv::SequenceCache> ShardedCache::clone() const {
  std::vector<std::unique_ptr<kv::SequenceCache>> c;
  for (const auto& s : shards_) c.push_back(s->clone());
  return std::make_unique<ShardedCache>(std::move(c));
}

namespace {

class TensorParallelModel final : public Model {
 public:
  TensorParallelModel(std::unique_ptr<ShardPlan> plan, std::unique_ptr<LocalGroup> group,
                      std::vector<std::unique_ptr<Model>> ranks)
      : plan_(std::move(plan)), group_(std::move(group)), ranks_(std::move(ranks)),
        threads_(static_cast<int>(ranks_.size())) {}

  const ModelConfig& config() const override { return plan_->full_config(); }

  Tensor forward(const BatchInput& in) override {
    const int n = static_cast<int>(ranks_.size());
    if (in.step) fail(ErrorKind::Internal, "tensor-parallel models do not take graph step inputs");
    std::vector<BatchInput> per_rank(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      per_rank[static_cast<size_t>(r)].tokens = in.tokens;
      per_rank[static_cast<size_t>(r)].positions = in.positions;
      for (const SeqInput& s : in.seqs) {
        auto* sharded = dynamic_cast<ShardedCache*>(s.cache);
        if (!sharded || sharded->ranks() != n)
          fail(ErrorKind::Internal, "a tensor-parallel model needs caches made by new_cache() for it");
        SeqInput rs = s;
        rs.cache = &sharded->shard(r);
        per_rank[static_cast<size_t>(r)].seqs.push_back(rs);
      }
    }
    std::vector<Tensor> logits(static_cast<size_t>(n));
    group_->reset();
    threads_.run([&](int r) { logits[static_cast<size_t>(r)] = ranks_[static_cast<size_t>(r)]->forward(
                                  per_rank[static_cast<size_t>(r)]); },
                 [&] { group_->abort(); });
    return logits[0];  // every rank computed the same replicated LM head
  }

  std::vector<kv::LayerSpec> cache_layout() const override {
    // What all ranks store together (memory estimates); caches come from make_cache.
    auto layout = ranks_[0]->cache_layout();
    for (auto& s : layout) s.kv_heads *= static_cast<int64_t>(ranks_.size());
    return layout;
  }

  std::unique_ptr<kv::SequenceCache> make_cache(const CacheOptions& opt) const override {
    std::vector<std::unique_ptr<kv::SequenceCache>> shards;
    for (const auto& m : ranks_) shards.push_back(new_cache(*m, opt));
    return std::make_unique<ShardedCache>(std::move(shards));
  }

  DType kv_dtype() const override { return ranks_[0]->kv_dtype(); }
  Device device() const override { return ranks_[0]->device(); }
  size_t weight_bytes() const override {
    size_t b = 0;
    for (const auto& m : ranks_) b += m->weight_bytes();
    return b;
  }

 private:
  std::unique_ptr<ShardPlan> plan_;
  std::unique_ptr<LocalGroup> group_;
  std::vector<std::unique_ptr<Model>> ranks_;
  RankThreads threads_;
};

}  // namespace

std::unique_ptr<Model> load_tensor_parallel(const std::string& path, const LoadOptions& opt, int ranks) {
  if (ranks == 1) return load_model(path, opt);
  if (opt.device != Device::CPU)
    fail(ErrorKind::Unsupported, "--tensor-parallel over ", device_name(opt.device),
         " devices needs one device context per rank, which this build does not have; use --device cpu");
  LoadOptions host = opt;
  host.device = Device::CPU;
  host.dtype.reset();  // each rank converts its own slice (ShardedSource)
  ModelConfig cfg;
  std::shared_ptr<const WeightSource> src;
  if (is_gguf_path(path)) {
    std::shared_ptr<const GgufFile> g = GgufFile::open(path);
    cfg = gguf_model_config(*g);
    src = open_gguf_source(g, cfg, host);
  } else {
    cfg = load_model_config(path);
    src = open_safetensors_source(path, cfg, host);
  }
  auto plan = std::make_unique<ShardPlan>(cfg, ranks);
  auto group = std::make_unique<LocalGroup>(ranks);
  const ModelConfig rank_cfg = plan->rank_config();
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < ranks; ++r) {
    ShardedSource shard(src, *plan, r, opt.device, opt.dtype);
    LoadOptions ro = opt;
    ro.collective = &group->member(r);
    models.push_back(build_model(rank_cfg, shard, ro));
  }
  return std::make_unique<TensorParallelModel>(std::move(plan), std::move(group), std::move(models));
}

}  // namespace ingot::parallel
