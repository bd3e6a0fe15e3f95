// The dense decoder family: Llama 2/3/3.x, Mistral, Qwen2, Qwen3 — one
// implementation with per-family options.
#pragma once
#include <memory>
#include <vector>

#include "models/common.h"
#include "models/lora.h"
#include "models/model.h"

namespace ingot {

struct DecoderOptions {
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3: RMSNorm over each head of q and k
  bool o_bias = false;
  bool mlp_bias = false;
  bool interleaved_rope = false;  // GGUF llama-style pairs
};

DecoderOptions decoder_options_for(const ModelConfig& cfg);

class DecoderModel final : public family::FamilyModel {
 public:
  DecoderModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt, DecoderOptions dopt);
  Tensor forward(const BatchInput& in) override;
  bool supports_hidden_states() const override { return true; }
  std::vector<kv::LayerSpec> cache_layout() const override;
  bool supports_step_inputs() const override { return true; }
  bool lora_targets(LoraTargets& out) const override;

 private:
  struct Layer {
    Tensor attn_norm, mlp_norm;
    Weight wq, wk, wv, wo;
    Tensor bq, bk, bv, bo;
    Tensor q_norm, k_norm;
    Weight gate, up, down;
    Tensor gate_b, up_b, down_b;
  };
  // Attention output before o_proj, [N, H * D].
  Tensor attention_block(const Layer& L, int layer_index, const Tensor& h, const Tensor& positions,
                         const BatchInput& in, const LoraBatch& lora);
  // residual + a·wᵀ (+ b) for o_proj / down_proj; under tensor parallelism
  // the rank's partial product is summed over ranks.
  Tensor row_parallel_residual(const Tensor& a, const Weight& w, const Tensor* b, const Tensor& residual) const;

  DecoderOptions opt_;
  Collective* tp_ = nullptr;
  int64_t window_ = 0;  // sliding window of every layer (Mistral), 0: none
  std::vector<Layer> layers_;
  RopeSpec rope_;
};

}  // namespace ingot
