// Small pieces every family file shares: the per-batch position plan,
// weight shape checks, per-sequence attention through the cache.
#pragma once
#include <string>
#include <vector>

#include "models/lora.h"
#include "models/model.h"
#include "models/weights.h"
#include "ops/ops.h"

namespace ingot::family {

// Positions of every token (each sequence continues its own cache) and the
// rows whose logits are returned.
struct BatchPlan {
  int64_t n = 0;
  Tensor ids, positions;       // i32 [n] on the model's device
  std::vector<int64_t> pick;   // rows of the batch that produce logits
  std::vector<int64_t> starts; // first row of each sequence
};
BatchPlan plan_batch(const BatchInput& in, Device device);

void expect_shape(const Weight& w, int64_t rows, int64_t cols, const std::string& name);
void expect_len(const Tensor& t, int64_t n, const std::string& name);
// Bytes of the embedding and the output head, counting a tied head once.
size_t embedding_bytes(const Weight& embed, const Weight& lm_head);

// Rounds activations to the reference's compute dtype at the points where
// the reference materialises a tensor in that dtype (bf16 checkpoints run
// in bf16 in transformers); identity for float32 models. Returns float32.
// A family turns it on where it measurably brings its bf16 runs closer to
// the reference (docs/models.md records both numbers).
struct ActRound {
  DType dtype = DType::F32;
  Tensor operator()(const Tensor& x) const {
    return dtype == DType::F32 ? x : ops::cast(ops::cast(x, dtype), DType::F32);
  }
};
// What every decoder family loads alike around its layers, shape-checked:
// the token embedding, the output head (the embedding's rows unless the
// checkpoint is untied and has lm_head.weight) and the final norm.
struct Trunk {
  Weight embed, lm_head;
  Tensor final_norm;
  // The checkpoint's dense dtype (float32 for quantized or affine weights).
  DType weight_dtype() const;
  size_t bytes() const { return embedding_bytes(embed, lm_head); }
  // The end of every forward pass: the rows that produce logits (plan.pick)
  // of the last hidden state x, final-normed (Gemma's 1 + w with
  // norm_offset), through the output head, soft-capped where softcap > 0:
  // float32 [rows, vocab].
  Tensor logits(Tensor x, const BatchPlan& plan, const ActRound& r, float eps, bool norm_offset = false,
                float softcap = 0) const;
};
Trunk load_trunk(const WeightSource& src, const ModelConfig& cfg);

// What every decoder family's model holds besides its layers: its config,
// device, trunk, K/V dtype and weight bytes, with the Model accessors.
class FamilyModel : public Model {
 public:
  const ModelConfig& config() const override { return cfg_; }
  DType kv_dtype() const override { return kv_dtype_; }
  Device device() const override { return device_; }
  size_t weight_bytes() const override { return weight_bytes_; }

 protected:
  FamilyModel(const ModelConfig& cfg, Device device) : cfg_(cfg), device_(device) {}
  // Loads the trunk and keeps K/V in the dtype its embedding calls for.
  void load_trunk_from(const WeightSource& src);

  ModelConfig cfg_;
  Device device_;
  DType kv_dtype_ = DType::F32;
  size_t weight_bytes_ = 0;
  Trunk trunk_;
};

// The compute dtype the reference uses for weights of `wdt`.
inline DType reference_dtype(DType wdt) { return wdt == DType::BF16 || wdt == DType::F16 ? wdt : DType::F32; }

// Appends k/v of each sequence's rows to its cache layer `cache_layer` and
// attends q over it. q [N, H, D], k [N, KV, D], v [N, KV, Dv] -> [N, H, Dv].
Tensor attend_with_cache(const BatchInput& in, const BatchPlan& plan, int cache_layer, const Tensor& q,
                         const Tensor& k, const Tensor& v, const AttnParams& p);
// Attends q over a cache layer another layer already appended to this step
// (Gemma 4 KV sharing).
Tensor attend_shared(const BatchInput& in, const BatchPlan& plan, int cache_layer, const Tensor& q,
                     const AttnParams& p);

// The GLU flavour a config's activation names (silu -> SwiGLU, gelu_tanh -> GeGLU).
GluOp glu_for_activation(const std::string& act, const std::string& model_type);

// A scalar rounded to the weights' dtype, as the reference multiplies by a
// tensor of that dtype (Gemma's sqrt(hidden) embedding scale).
float round_to_dtype(float v, DType t);

// The dtype a model keeps its K/V in, from its embedding table: float32 for
// float32 checkpoints (the parity contract's 1e-5), else bf16 (16-bit and
// quantized checkpoints: half the bytes a long-context decode step reads,
// as llama.cpp keeps f16).
DType kv_dtype_for(const Weight& embed);

// A family's adapter targets from its layers' projection weights (a weight a
// layer does not have takes none) and, where layers hold an MoE block, its
// experts (lora_experts, found by argument lookup in moe.h). Adapters are
// kept in `dtype`: the KV dtype, float32 for float32 checkpoints, else bf16.
template <class Layer>
void lora_targets_from(LoraTargets& out, const ModelConfig& cfg, DType dtype, const std::vector<Layer>& layers) {
  out.model_type = cfg.model_type;
  out.layers = cfg.num_hidden_layers;
  out.dtype = dtype;
  for (const Layer& L : layers) {
    out.per_layer.push_back(lora_shapes(L.wq, L.wk, L.wv, L.wo, L.gate, L.up, L.down));
    if constexpr (requires { L.moe; }) out.experts.push_back(lora_experts(L.moe));
  }
}

// x @ w^T plus the batch's adapter update of projection `t` at `site` (none
// when `lora` is null or holds no adapter rows).
Tensor lora_linear(const Tensor& x, const Weight& w, const LoraBatch* lora, const LoraSite& site, LoraTarget t);

// down(act(gate(h)) * up(h)) with the reference's roundings, each projection
// with its adapter update when `lora` holds adapter rows.
Tensor dense_mlp(GluOp act, const Tensor& h, const Weight& gate, const Weight& up, const Weight& down,
                 const ActRound& r = {}, const LoraBatch* lora = nullptr, const LoraSite& site = {});

// Columns [a, b) of a [N, M] activation, contiguous.
Tensor cols(const Tensor& x, int64_t a, int64_t b);

}  // namespace ingot::family
