// Qwen3-Next and Qwen3.5 (text): gated DeltaNet linear-attention layers
// interleaved with gated full-attention layers (q_proj also yields a
// per-head output gate; q/k RMSNorm; partial rotary). Norms are (1 + w).
// Qwen3-Next's MLPs are sparse MoE with a sigmoid-gated shared expert;
// Qwen3.5's are dense.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/families.h"
#include "models/gated_deltanet.h"
#include "models/moe.h"
#include "util/error.h"

namespace ingot {

namespace {

using family::expect_len;
using family::expect_shape;

class HybridModel final : public family::FamilyModel {
 public:
  HybridModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& lopt)
      : FamilyModel(cfg, lopt.device) {
    const int64_t H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim;
    const int64_t hid = cfg_.hidden_size, L = cfg_.num_hidden_layers;
    if (H <= 0 || KV <= 0 || D <= 0 || hid <= 0 || L <= 0 || cfg_.vocab_size <= 0 || H % KV)
      fail(ErrorKind::BadFormat, "config: bad attention / layer sizes for ", cfg_.model_type);
    const bool next = cfg_.model_type == "qwen3_next";
    const GluOp act = family::glu_for_activation(cfg_.hidden_act, cfg_.model_type);
    eps_ = static_cast<float>(cfg_.rms_norm_eps);
    const int64_t experts = next ? cfg_.get_int("num_experts", 0) : 0;
    const int64_t step = std::max<int64_t>(1, cfg_.get_int("decoder_sparse_step", 1));
    const int64_t interval = std::max<int64_t>(1, cfg_.get_int("full_attention_interval", 4));
    std::vector<int64_t> mlp_only;
    if (cfg_.raw->contains("mlp_only_layers") && (*cfg_.raw)["mlp_only_layers"].is_array())
      for (const auto& v : (*cfg_.raw)["mlp_only_layers"]) mlp_only.push_back(v.get<int64_t>());

    load_trunk_from(src);
    const DType wdt = trunk_.weight_dtype();
    rnd_.dtype = family::reference_dtype(wdt);
    rope_ = make_rope_spec(cfg_.rope_for("full_attention"), static_cast<int>(D));

    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Layer ly;
      std::string type = static_cast<size_t>(i) < cfg_.layer_types.size()
                             ? cfg_.layer_types[static_cast<size_t>(i)]
                             : ((i + 1) % interval ? "linear_attention" : "full_attention");
      ly.linear = type == "linear_attention";
      if (!ly.linear && type != "full_attention")
        fail(ErrorKind::Unsupported, "config: layer type '", type, "' is not supported for ", cfg_.model_type);
      ly.attn_norm = src.vector(p + "input_layernorm.weight");
      ly.mlp_norm = src.vector(p + "post_attention_layernorm.weight");
      expect_len(ly.attn_norm, hid, p + "input_layernorm.weight");
      expect_len(ly.mlp_norm, hid, p + "post_attention_layernorm.weight");
      if (ly.linear) {
        ly.delta = family::load_deltanet(src, p + "linear_attn.", cfg_, next, device_);
        weight_bytes_ += ly.delta.nbytes();
      } else {
        ly.wq = src.matrix(p + "self_attn.q_proj.weight");
        ly.wk = src.matrix(p + "self_attn.k_proj.weight");
        ly.wv = src.matrix(p + "self_attn.v_proj.weight");
        ly.wo = src.matrix(p + "self_attn.o_proj.weight");
        expect_shape(ly.wq, 2 * H * D, hid, p + "self_attn.q_proj.weight");
        expect_shape(ly.wk, KV * D, hid, p + "self_attn.k_proj.weight");
        expect_shape(ly.wv, KV * D, hid, p + "self_attn.v_proj.weight");
        expect_shape(ly.wo, hid, H * D, p + "self_attn.o_proj.weight");
        ly.q_norm = src.vector(p + "self_attn.q_norm.weight");
        ly.k_norm = src.vector(p + "self_attn.k_norm.weight");
        expect_len(ly.q_norm, D, p + "self_attn.q_norm.weight");
        expect_len(ly.k_norm, D, p + "self_attn.k_norm.weight");
        weight_bytes_ += ly.wq.nbytes() + ly.wk.nbytes() + ly.wv.nbytes() + ly.wo.nbytes();
      }
      const bool sparse = experts > 0 && std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end() &&
                          (i + 1) % step == 0;
      if (sparse) {
        ly.moe = family::load_moe(src, p + "mlp.", experts, hid, cfg_.get_int("moe_intermediate_size", 0),
                                  cfg_.get_int("shared_expert_intermediate_size", 0),
                                  cfg_.get_int("num_experts_per_tok", 1), cfg_.get_bool("norm_topk_prob", true), act);
        weight_bytes_ += ly.moe.nbytes();
      } else {
        ly.gate = src.matrix(p + "mlp.gate_proj.weight");
        ly.up = src.matrix(p + "mlp.up_proj.weight");
        ly.down = src.matrix(p + "mlp.down_proj.weight");
        expect_shape(ly.gate, cfg_.intermediate_size, hid, p + "mlp.gate_proj.weight");
        expect_shape(ly.up, cfg_.intermediate_size, hid, p + "mlp.up_proj.weight");
        expect_shape(ly.down, hid, cfg_.intermediate_size, p + "mlp.down_proj.weight");
        weight_bytes_ += ly.gate.nbytes() + ly.up.nbytes() + ly.down.nbytes();
      }
      ly.act = act;
      layers_.push_back(std::move(ly));
    }
    weight_bytes_ += trunk_.bytes();
  }


  std::vector<kv::LayerSpec> cache_layout() const override {
    std::vector<kv::LayerSpec> out;
    for (const Layer& ly : layers_) {
      if (ly.linear) {
        out.push_back(ly.delta.cache_spec());
        continue;
      }
      kv::LayerSpec s;
      s.kv_heads = cfg_.num_key_value_heads;
      s.head_dim = s.v_head_dim = cfg_.head_dim;
      out.push_back(s);
    }
    return out;
  }

  // The full-attention layers' q / k / v / o, dense MLPs and each expert's
  // projections; the linear-attention (gated DeltaNet) layers and the shared
  // expert take none.
  bool lora_targets(LoraTargets& out) const override {
    family::lora_targets_from(out, cfg_, kv_dtype_, layers_);
    return true;
  }

  Tensor forward(const BatchInput& in) override {
    family::BatchPlan plan = family::plan_batch(in, device_);
    const int64_t N = plan.n, H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim;
    const family::ActRound& r = rnd_;
    // Adapters stay beside the base weights: each projection adds its rows' update before rounding.
    const LoraBatch lora(in);
    const LoraBatch* lb = lora.empty() ? nullptr : &lora;
    Tensor x = ops::embedding(trunk_.embed, plan.ids);
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& L = layers_[li];
      const auto l = static_cast<int64_t>(li);
      Tensor h = r(ops::rms_norm(x, L.attn_norm, eps_, true));
      if (L.linear) {
        x = r(ops::add(x, family::deltanet_forward(L.delta, h, in, plan, static_cast<int>(li), r)));
      } else {
        Tensor qg = r(family::lora_linear(h, L.wq, lb, {l}, LoraTarget::Q)).reshape({N, H, 2 * D});
        Tensor q = r(ops::rms_norm(qg.slice(2, 0, D).contiguous(), L.q_norm, eps_, true));
        Tensor gate = qg.slice(2, D, 2 * D).contiguous();
        Tensor k = r(family::lora_linear(h, L.wk, lb, {l}, LoraTarget::K)).reshape({N, KV, D});
        k = r(ops::rms_norm(k, L.k_norm, eps_, true));
        Tensor v = r(family::lora_linear(h, L.wv, lb, {l}, LoraTarget::V)).reshape({N, KV, D});
        ops::rope_inplace(q, plan.positions, rope_);
        ops::rope_inplace(k, plan.positions, rope_);
        q = r(q);
        k = r(k);
        AttnParams ap;
        ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
        Tensor o = r(family::attend_with_cache(in, plan, static_cast<int>(li), q, k, v, ap));
        o = r(ops::mul(o, r(ops::sigmoid(gate))));
        x = r(ops::add(x, r(family::lora_linear(o.reshape({N, H * D}), L.wo, lb, {l}, LoraTarget::O))));
      }
      h = r(ops::rms_norm(x, L.mlp_norm, eps_, true));
      Tensor m = L.moe.num_experts() ? family::moe_forward(L.moe, h, r, lb, l)
                                     : family::dense_mlp(L.act, h, L.gate, L.up, L.down, r, lb, {l});
      x = r(ops::add(x, r(m)));
    }
    return trunk_.logits(x, plan, r, eps_, true);
  }

 private:
  struct Layer {
    bool linear = false;
    Tensor attn_norm, mlp_norm, q_norm, k_norm;
    Weight wq, wk, wv, wo, gate, up, down;
    family::DeltaNetLayer delta;
    family::MoeBlock moe;
    GluOp act = GluOp::SwiGlu;
  };
  float eps_ = 1e-6f;
  family::ActRound rnd_;
  RopeSpec rope_;
  std::vector<Layer> layers_;
};

}  // namespace

void register_hybrid_family() {
  register_family({"qwen3_next", "qwen3_5_text"}, [](const ModelConfig& cfg, const WeightSource& src,
                                                     const LoadOptions& o) {
    return std::make_unique<HybridModel>(cfg, src, o);
  });
}

}  // namespace ingot
