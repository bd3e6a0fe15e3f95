// Draft-model drafting: a cheaper model with the target's tokenizer (a
// smaller model of the family, or a more quantized copy) proposes its greedy
// continuation. Each sequence keeps the draft model's KV cache of its own,
// of the engine's KV kind (paged kinds share one pool of the draft model's
// layout); before drafting it drops what the target rejected and feeds what
// it has not seen, so only new tokens cost draft compute.
#pragma once
#include <memory>
#include <string>

#include "ingot/engine.h"
#include "kv/pool.h"
#include "models/model.h"

namespace ingot::engine {

class DraftModelDrafter final : public Drafter {
 public:
  // `model` must outlive the drafter and every sequence it starts; `kv` is a
  // kv::StoreKind name. InvalidArgument when the model cannot drop tokens.
  DraftModelDrafter(Model& model, const std::string& kv, int64_t prefill_chunk = 512);
  std::unique_ptr<SequenceDrafter> start() const override;
  int64_t kv_bytes(int64_t tokens) const override;
  // A model of the family, or a quantized copy, agrees on most greedy tokens.
  double expected_acceptance() const override { return 0.85; }

 private:
  Model& model_;
  std::string kv_;
  int64_t prefill_chunk_;
  std::shared_ptr<kv::Pool> pool_;  // paged kinds: every sequence's draft cache
};

}  // namespace ingot::engine
