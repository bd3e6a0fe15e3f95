// Gemma 2 and Gemma 3 (text): (1 + w) RMSNorm with norms before and after
// both the attention and the MLP, GeGLU, a sqrt(hidden) embedding scale,
// query_pre_attn_scalar, optional attention / final-logit soft-capping and
// sliding / full layer types, each with its own rope base (Gemma 3) and
// per-head q/k norms (Gemma 3).
#include <cmath>

#include "models/common.h"
#include "models/families.h"
#include "util/error.h"

namespace ingot {

namespace {

using family::expect_len;
using family::expect_shape;

class GemmaModel final : public family::FamilyModel {
 public:
  GemmaModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& lopt)
      : FamilyModel(cfg, lopt.device) {
    const int64_t H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim;
    const int64_t hid = cfg_.hidden_size, inter = cfg_.intermediate_size, L = cfg_.num_hidden_layers;
    if (H <= 0 || KV <= 0 || D <= 0 || hid <= 0 || inter <= 0 || L <= 0 || cfg_.vocab_size <= 0 || H % KV)
      fail(ErrorKind::BadFormat, "config: bad attention / layer sizes for ", cfg_.model_type);
    gemma3_ = cfg_.model_type != "gemma2";
    glu_ = family::glu_for_activation(cfg_.hidden_act, cfg_.model_type);
    eps_ = static_cast<float>(cfg_.rms_norm_eps);
    attn_scale_ = 1.0f / std::sqrt(static_cast<float>(cfg_.get_double("query_pre_attn_scalar", double(D))));
    attn_softcap_ = static_cast<float>(cfg_.get_double("attn_logit_softcapping", 0.0));
    final_softcap_ = static_cast<float>(cfg_.get_double("final_logit_softcapping", 0.0));

    load_trunk_from(src);
    const DType wdt = trunk_.weight_dtype();
    embed_scale_ = family::round_to_dtype(std::sqrt(static_cast<float>(hid)), wdt);
    // Gemma 3 rounds activations like the bf16 reference; Gemma 2 measured
    // closer to it with float32 activations (docs/models.md).
    rnd_.dtype = gemma3_ ? family::reference_dtype(wdt) : DType::F32;

    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Layer ly;
      // Gemma 2's default pattern alternates sliding (even) and full (odd);
      // Gemma 3's puts a full layer every sliding_window_pattern layers.
      std::string type;
      if (static_cast<size_t>(i) < cfg_.layer_types.size()) {
        type = cfg_.layer_types[static_cast<size_t>(i)];
      } else if (!gemma3_) {
        type = i % 2 == 0 ? "sliding_attention" : "full_attention";
      } else {
        int64_t pat = cfg_.get_int("sliding_window_pattern", cfg_.get_int("_sliding_window_pattern", 6));
        type = (i + 1) % pat ? "sliding_attention" : "full_attention";
      }
      ly.sliding = type == "sliding_attention";
      if (!ly.sliding && type != "full_attention")
        fail(ErrorKind::Unsupported, "config: layer type '", type, "' is not supported for ", cfg_.model_type);
      ly.rope = make_rope_spec(cfg_.rope_for(type), static_cast<int>(D));
      for (auto [t, name] : {std::pair{&ly.in_norm, "input_layernorm"}, {&ly.post_attn_norm, "post_attention_layernorm"},
                             {&ly.pre_ff_norm, "pre_feedforward_layernorm"},
                             {&ly.post_ff_norm, "post_feedforward_layernorm"}}) {
        *t = src.vector(p + name + ".weight");
        expect_len(*t, hid, p + name + ".weight");
      }
      ly.wq = src.matrix(p + "self_attn.q_proj.weight");
      ly.wk = src.matrix(p + "self_attn.k_proj.weight");
      ly.wv = src.matrix(p + "self_attn.v_proj.weight");
      ly.wo = src.matrix(p + "self_attn.o_proj.weight");
      expect_shape(ly.wq, H * D, hid, p + "self_attn.q_proj.weight");
      expect_shape(ly.wk, KV * D, hid, p + "self_attn.k_proj.weight");
      expect_shape(ly.wv, KV * D, hid, p + "self_attn.v_proj.weight");
      expect_shape(ly.wo, hid, H * D, p + "self_attn.o_proj.weight");
      if (gemma3_) {
        ly.q_norm = src.vector(p + "self_attn.q_norm.weight");
        ly.k_norm = src.vector(p + "self_attn.k_norm.weight");
        expect_len(ly.q_norm, D, p + "self_attn.q_norm.weight");
        expect_len(ly.k_norm, D, p + "self_attn.k_norm.weight");
      }
      ly.gate = src.matrix(p + "mlp.gate_proj.weight");
      ly.up = src.matrix(p + "mlp.up_proj.weight");
      ly.down = src.matrix(p + "mlp.down_proj.weight");
      expect_shape(ly.gate, inter, hid, p + "mlp.gate_proj.weight");
      expect_shape(ly.up, inter, hid, p + "mlp.up_proj.weight");
      expect_shape(ly.down, hid, inter, p + "mlp.down_proj.weight");
      for (const Weight* w : {&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down}) weight_bytes_ += w->nbytes();
      layers_.push_back(std::move(ly));
    }
    weight_bytes_ += trunk_.bytes();
  }


  std::vector<kv::LayerSpec> cache_layout() const override {
    std::vector<kv::LayerSpec> out;
    for (const Layer& ly : layers_) {
      kv::LayerSpec s;
      s.kv_heads = cfg_.num_key_value_heads;
      s.head_dim = s.v_head_dim = cfg_.head_dim;
      s.window = ly.sliding ? cfg_.sliding_window : 0;
      out.push_back(s);
    }
    return out;
  }

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
    Tensor x = r(ops::scale(ops::embedding(trunk_.embed, plan.ids), embed_scale_));
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& L = layers_[li];
      const auto l = static_cast<int64_t>(li);
      Tensor h = r(ops::rms_norm(x, L.in_norm, eps_, true));
      Tensor q = r(family::lora_linear(h, L.wq, lb, {l}, LoraTarget::Q)).reshape({N, H, D});
      Tensor k = r(family::lora_linear(h, L.wk, lb, {l}, LoraTarget::K)).reshape({N, KV, D});
      Tensor v = r(family::lora_linear(h, L.wv, lb, {l}, LoraTarget::V)).reshape({N, KV, D});
      if (gemma3_) {
        q = r(ops::rms_norm(q, L.q_norm, eps_, true));
        k = r(ops::rms_norm(k, L.k_norm, eps_, true));
      }
      ops::rope_inplace(q, plan.positions, L.rope);
      ops::rope_inplace(k, plan.positions, L.rope);
      q = r(q);
      k = r(k);
      AttnParams ap;
      ap.scale = attn_scale_;
      ap.softcap = attn_softcap_;
      ap.window = L.sliding ? cfg_.sliding_window : 0;
      Tensor o = r(family::attend_with_cache(in, plan, static_cast<int>(li), q, k, v, ap));
      Tensor a = r(family::lora_linear(o.reshape({N, H * D}), L.wo, lb, {l}, LoraTarget::O));
      x = r(ops::add(x, r(ops::rms_norm(a, L.post_attn_norm, eps_, true))));
      h = r(ops::rms_norm(x, L.pre_ff_norm, eps_, true));
      Tensor m = family::dense_mlp(glu_, h, L.gate, L.up, L.down, r, lb, {l});
      x = r(ops::add(x, r(ops::rms_norm(m, L.post_ff_norm, eps_, true))));
    }
    return trunk_.logits(x, plan, r, eps_, true, final_softcap_);
  }

 private:
  struct Layer {
    bool sliding = false;
    RopeSpec rope;
    Tensor in_norm, post_attn_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm;
    Weight wq, wk, wv, wo, gate, up, down;
  };
  bool gemma3_ = false;
  GluOp glu_ = GluOp::GeGluTanh;
  float eps_ = 1e-6f, attn_scale_ = 1, attn_softcap_ = 0, final_softcap_ = 0, embed_scale_ = 1;
  family::ActRound rnd_;
  std::vector<Layer> layers_;
};

}  // namespace

void register_gemma_family() {
  register_family({"gemma2", "gemma3_text"}, [](const ModelConfig& cfg, const WeightSource& src, const LoadOptions& o) {
    return std::make_unique<GemmaModel>(cfg, src, o);
  });
}

}  // namespace ingot
