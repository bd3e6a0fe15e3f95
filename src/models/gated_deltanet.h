// The gated DeltaNet linear-attention layer of Qwen3-Next and Qwen3.5:
// projections to q, k, v (through a short depthwise causal conv + SiLU), an
// output gate z, a write strength beta = sigmoid(b) and a per-head decay
// g = -exp(A_log) * softplus(a + dt_bias); q and k are L2-normalised and the
// gated delta rule folds each token into a [k_dim, v_dim] state per value
// head. The output is RMSNorm(o) * silu(z), projected back to the hidden size.
// Its per-sequence state lives in the cache's linear-state store.
#pragma once
#include <string>

#include "kv/linear_state.h"
#include "models/common.h"

namespace ingot::family {

struct DeltaNetLayer {
  int64_t nk = 0, nv = 0, dk = 0, dv = 0, kernel = 0;
  float eps = 1e-6f;
  // Rows ordered [q heads | k heads | v heads] (the conv's channel order).
  Weight in_qkv, in_z, in_b, in_a, out_proj;
  Tensor conv_w;   // [channels, kernel]
  Tensor neg_a;    // -exp(A_log) [nv]
  Tensor dt_bias;  // [nv]
  Tensor norm_w;   // [dv]

  int64_t key_dim() const { return nk * dk; }
  int64_t value_dim() const { return nv * dv; }
  int64_t channels() const { return 2 * key_dim() + value_dim(); }
  kv::LayerSpec cache_spec() const;
  size_t nbytes() const;
};

// `fused`: Qwen3-Next's in_proj_qkvz / in_proj_ba (grouped per key head),
// else Qwen3.5's separate in_proj_qkv / in_proj_z / in_proj_b / in_proj_a.
DeltaNetLayer load_deltanet(const WeightSource& src, const std::string& prefix, const ModelConfig& cfg, bool fused,
                            Device device);

// h [N, hidden] for the batch; each sequence continues its own state in
// cache layer `cache_layer`. -> [N, hidden].
Tensor deltanet_forward(const DeltaNetLayer& L, const Tensor& h, const BatchInput& in, const BatchPlan& plan,
                        int cache_layer, const ActRound& r = {}, DeltaRuleForm form = DeltaRuleForm::Auto);

}  // namespace ingot::family
