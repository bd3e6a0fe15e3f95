// Gemma 4 (text). Beyond Gemma 3: per-layer input embeddings (a second,
// packed embedding table plus a projection of the main embedding, fed into
// every layer through a small gated bottleneck), per-layer head dims (full
// layers are wider), proportional partial rope on full layers, plain-weight
// RMSNorm (not 1 + w) with a scale-free norm on V, attention scale 1, a
// learned per-layer output scalar, and KV sharing: the last
// num_kv_shared_layers layers have no K/V of their own and attend over the
// cache of the last earlier layer of the same type.
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "models/common.h"
#include "models/families.h"
#include "util/error.h"

namespace ingot {

namespace {

using family::expect_len;
using family::expect_shape;

class Gemma4Model final : public family::FamilyModel {
 public:
  Gemma4Model(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& lopt)
      : FamilyModel(cfg, lopt.device) {
    const int64_t hid = cfg_.hidden_size, L = cfg_.num_hidden_layers;
    if (hid <= 0 || L <= 0 || cfg_.vocab_size <= 0 || cfg_.num_attention_heads <= 0 ||
        cfg_.num_key_value_heads <= 0 || cfg_.head_dim <= 0)
      fail(ErrorKind::BadFormat, "config: bad sizes for ", cfg_.model_type);
    if (cfg_.get_bool("enable_moe_block", false))
      fail(ErrorKind::Unsupported, "gemma4_text with enable_moe_block is not supported yet");
    glu_ = family::glu_for_activation(cfg_.hidden_act, cfg_.model_type);
    eps_ = static_cast<float>(cfg_.rms_norm_eps);
    final_softcap_ = static_cast<float>(cfg_.get_double("final_logit_softcapping", 0.0));
    ple_dim_ = cfg_.get_int("hidden_size_per_layer_input", 0);
    const int64_t n_shared = cfg_.get_int("num_kv_shared_layers", 0);
    first_shared_ = L - n_shared;
    if (n_shared < 0 || first_shared_ < 1) fail(ErrorKind::BadFormat, "config: bad num_kv_shared_layers ", n_shared);
    const bool k_eq_v = cfg_.get_bool("attention_k_eq_v", false);
    const bool double_wide = cfg_.get_bool("use_double_wide_mlp", false);

    load_trunk_from(src);
    const DType wdt = trunk_.weight_dtype();
    // Gemma 4 measured closer to the bf16 reference with float32 activations
    // (docs/models.md), so the rounding points stay inactive.
    rnd_.dtype = DType::F32;
    embed_scale_ = family::round_to_dtype(std::sqrt(static_cast<float>(hid)), wdt);
    if (ple_dim_ > 0) {
      ple_embed_ = src.matrix("model.embed_tokens_per_layer.weight");
      expect_shape(ple_embed_, cfg_.get_int("vocab_size_per_layer_input", cfg_.vocab_size), L * ple_dim_,
                   "model.embed_tokens_per_layer.weight");
      ple_proj_ = src.matrix("model.per_layer_model_projection.weight");
      expect_shape(ple_proj_, L * ple_dim_, hid, "model.per_layer_model_projection.weight");
      ple_norm_ = src.vector("model.per_layer_projection_norm.weight");
      expect_len(ple_norm_, ple_dim_, "model.per_layer_projection_norm.weight");
      ple_embed_scale_ = family::round_to_dtype(std::sqrt(static_cast<float>(ple_dim_)), wdt);
    }

    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Layer ly;
      ly.type = static_cast<size_t>(i) < cfg_.layer_types.size() ? cfg_.layer_types[static_cast<size_t>(i)]
                                                                  : "full_attention";
      ly.sliding = ly.type == "sliding_attention";
      if (!ly.sliding && ly.type != "full_attention")
        fail(ErrorKind::Unsupported, "config: layer type '", ly.type, "' is not supported for gemma4_text");
      ly.heads = per_layer_int(i, "num_attention_heads", cfg_.num_attention_heads);
      ly.head_dim = per_layer_int(i, "head_dim", !ly.sliding ? cfg_.get_int("global_head_dim", cfg_.head_dim)
                                                             : cfg_.head_dim);
      const bool alt = k_eq_v && !ly.sliding;
      ly.kv_heads = per_layer_int(i, "num_key_value_heads",
                                  alt ? cfg_.get_int("num_global_key_value_heads", cfg_.num_key_value_heads)
                                      : cfg_.num_key_value_heads);
      if (ly.heads % ly.kv_heads) fail(ErrorKind::BadFormat, "config: layer ", i, " heads not a multiple of KV heads");
      ly.rope = make_rope_spec(cfg_.rope_for(ly.type), static_cast<int>(ly.head_dim));
      ly.shared_from = -1;
      if (i >= first_shared_) {
        for (int64_t j = first_shared_ - 1; j >= 0; --j)
          if (layers_[static_cast<size_t>(j)].type == ly.type) {
            ly.shared_from = j;
            break;
          }
        if (ly.shared_from < 0) fail(ErrorKind::BadFormat, "config: KV-shared layer ", i, " has no source layer");
        const Layer& srcl = layers_[static_cast<size_t>(ly.shared_from)];
        if (srcl.head_dim != ly.head_dim || srcl.kv_heads != ly.kv_heads)
          fail(ErrorKind::BadFormat, "config: KV-shared layer ", i, " does not match its source's shape");
      }
      const int64_t H = ly.heads, KV = ly.kv_heads, D = ly.head_dim;
      for (auto [t, name] : {std::pair{&ly.in_norm, "input_layernorm"}, {&ly.post_attn_norm, "post_attention_layernorm"},
                             {&ly.pre_ff_norm, "pre_feedforward_layernorm"},
                             {&ly.post_ff_norm, "post_feedforward_layernorm"}}) {
        *t = src.vector(p + name + ".weight");
        expect_len(*t, hid, p + name + ".weight");
      }
      ly.wq = src.matrix(p + "self_attn.q_proj.weight");
      expect_shape(ly.wq, H * D, hid, p + "self_attn.q_proj.weight");
      ly.q_norm = src.vector(p + "self_attn.q_norm.weight");
      expect_len(ly.q_norm, D, p + "self_attn.q_norm.weight");
      if (ly.shared_from < 0) {
        ly.wk = src.matrix(p + "self_attn.k_proj.weight");
        expect_shape(ly.wk, KV * D, hid, p + "self_attn.k_proj.weight");
        if (!alt) {
          ly.wv = src.matrix(p + "self_attn.v_proj.weight");
          expect_shape(ly.wv, KV * D, hid, p + "self_attn.v_proj.weight");
        }
        ly.k_norm = src.vector(p + "self_attn.k_norm.weight");
        expect_len(ly.k_norm, D, p + "self_attn.k_norm.weight");
      }
      ly.wo = src.matrix(p + "self_attn.o_proj.weight");
      expect_shape(ly.wo, hid, H * D, p + "self_attn.o_proj.weight");
      const int64_t inter = cfg_.intermediate_size * (double_wide && ly.shared_from >= 0 ? 2 : 1);
      ly.gate = src.matrix(p + "mlp.gate_proj.weight");
      ly.up = src.matrix(p + "mlp.up_proj.weight");
      ly.down = src.matrix(p + "mlp.down_proj.weight");
      expect_shape(ly.gate, inter, hid, p + "mlp.gate_proj.weight");
      expect_shape(ly.up, inter, hid, p + "mlp.up_proj.weight");
      expect_shape(ly.down, hid, inter, p + "mlp.down_proj.weight");
      if (ple_dim_ > 0) {
        ly.ple_gate = src.matrix(p + "per_layer_input_gate.weight");
        ly.ple_out = src.matrix(p + "per_layer_projection.weight");
        expect_shape(ly.ple_gate, ple_dim_, hid, p + "per_layer_input_gate.weight");
        expect_shape(ly.ple_out, hid, ple_dim_, p + "per_layer_projection.weight");
        ly.ple_norm = src.vector(p + "post_per_layer_input_norm.weight");
        expect_len(ly.ple_norm, hid, p + "post_per_layer_input_norm.weight");
      }
      ly.scalar = src.has(p + "layer_scalar") ? src.vector(p + "layer_scalar").to_f32_vector().at(0) : 1.0f;
      for (const Weight* w : {&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down, &ly.ple_gate, &ly.ple_out})
        if (w->defined()) weight_bytes_ += w->nbytes();
      ones_[D] = Tensor::from_f32(std::vector<float>(static_cast<size_t>(D), 1.0f), {D}).to(device_);
      layers_.push_back(std::move(ly));
    }
    weight_bytes_ += trunk_.bytes() + (ple_embed_.defined() ? ple_embed_.nbytes() + ple_proj_.nbytes() : 0);
  }


  // Only layers that own K/V get a store; shared layers read their source's.
  std::vector<kv::LayerSpec> cache_layout() const override {
    std::vector<kv::LayerSpec> out;
    for (int64_t i = 0; i < first_shared_; ++i) {
      const Layer& ly = layers_[static_cast<size_t>(i)];
      kv::LayerSpec s;
      s.kv_heads = ly.kv_heads;
      s.head_dim = s.v_head_dim = ly.head_dim;
      s.window = ly.sliding ? cfg_.sliding_window : 0;
      out.push_back(s);
    }
    return out;
  }

  // Every projection of every layer, with that layer's shapes; a layer that
  // reuses another's K/V has no k / v projection, and one whose values are
  // its keys has no v projection (a K adapter then reaches both, as merged).
  bool lora_targets(LoraTargets& out) const override {
    family::lora_targets_from(out, cfg_, kv_dtype_, layers_);
    return true;
  }

  Tensor forward(const BatchInput& in) override {
    family::BatchPlan plan = family::plan_batch(in, device_);
    const int64_t N = plan.n, nl = cfg_.num_hidden_layers;
    const family::ActRound& r = rnd_;
    // Adapters stay beside the base weights: each projection adds its rows' update before rounding.
    const LoraBatch lora(in);
    const LoraBatch* lb = lora.empty() ? nullptr : &lora;
    Tensor x = r(ops::scale(ops::embedding(trunk_.embed, plan.ids), embed_scale_));
    Tensor ple;  // [N, layers, ple_dim]
    if (ple_dim_ > 0) {
      Tensor tok = r(ops::scale(ops::embedding(ple_embed_, plan.ids), ple_embed_scale_)).reshape({N, nl, ple_dim_});
      Tensor ctx = r(ops::scale(r(ops::linear(x, ple_proj_)), 1.0f / std::sqrt(static_cast<float>(cfg_.hidden_size))));
      ctx = r(ops::rms_norm(ctx.reshape({N, nl, ple_dim_}), ple_norm_, eps_));
      ple = r(ops::scale(r(ops::add(ctx, tok)), 1.0f / std::sqrt(2.0f)));
    }
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& L = layers_[li];
      const int64_t H = L.heads, KV = L.kv_heads, D = L.head_dim;
      const auto l = static_cast<int64_t>(li);
      Tensor h = r(ops::rms_norm(x, L.in_norm, eps_));
      Tensor q = r(family::lora_linear(h, L.wq, lb, {l}, LoraTarget::Q)).reshape({N, H, D});
      q = r(ops::rms_norm(q, L.q_norm, eps_));
      ops::rope_inplace(q, plan.positions, L.rope);
      q = r(q);
      AttnParams ap;
      ap.scale = 1.0f;
      ap.window = L.sliding ? cfg_.sliding_window : 0;
      Tensor o;
      if (L.shared_from >= 0) {
        o = r(family::attend_shared(in, plan, static_cast<int>(L.shared_from), q, ap));
      } else {
        Tensor kraw = r(family::lora_linear(h, L.wk, lb, {l}, LoraTarget::K)).reshape({N, KV, D});
        Tensor v = L.wv.defined() ? r(family::lora_linear(h, L.wv, lb, {l}, LoraTarget::V)).reshape({N, KV, D}) : kraw;
        Tensor k = r(ops::rms_norm(kraw, L.k_norm, eps_));
        ops::rope_inplace(k, plan.positions, L.rope);
        k = r(k);
        v = r(ops::rms_norm(v, ones_.at(D), eps_));
        o = r(family::attend_with_cache(in, plan, static_cast<int>(li), q, k, v, ap));
      }
      Tensor a = r(family::lora_linear(o.reshape({N, H * D}), L.wo, lb, {l}, LoraTarget::O));
      x = r(ops::add(x, r(ops::rms_norm(a, L.post_attn_norm, eps_))));
      h = r(ops::rms_norm(x, L.pre_ff_norm, eps_));
      Tensor m = family::dense_mlp(glu_, h, L.gate, L.up, L.down, r, lb, {l});
      x = r(ops::add(x, r(ops::rms_norm(m, L.post_ff_norm, eps_))));
      if (ple_dim_ > 0) {
        Tensor mine = ple.slice(1, static_cast<int64_t>(li), static_cast<int64_t>(li) + 1).contiguous()
                          .reshape({N, ple_dim_});
        Tensor g = r(ops::glu(glu_, r(ops::linear(x, L.ple_gate)), mine));
        x = r(ops::add(x, r(ops::rms_norm(r(ops::linear(g, L.ple_out)), L.ple_norm, eps_))));
      }
      if (L.scalar != 1.0f) x = r(ops::scale(x, L.scalar));
    }
    return trunk_.logits(x, plan, r, eps_, false, final_softcap_);
  }

 private:
  struct Layer {
    std::string type;
    bool sliding = false;
    int64_t heads = 0, kv_heads = 0, head_dim = 0, shared_from = -1;
    RopeSpec rope;
    Tensor in_norm, post_attn_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm, ple_norm;
    Weight wq, wk, wv, wo, gate, up, down, ple_gate, ple_out;
    float scalar = 1.0f;
  };

  // A per-layer override from config.per_layer_config (keys are layer
  // indices, possibly zero-padded), else `dflt`.
  int64_t per_layer_int(int64_t layer, const std::string& key, int64_t dflt) const {
    const auto& raw = *cfg_.raw;
    auto plc = raw.find("per_layer_config");
    if (plc == raw.end() || !plc->is_object()) return dflt;
    for (auto it = plc->begin(); it != plc->end(); ++it) {
      const std::string& k = it.key();
      if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos || std::stoll(k) != layer) continue;
      if (it->is_object() && it->contains(key) && (*it)[key].is_number_integer()) return (*it)[key].get<int64_t>();
    }
    return dflt;
  }

  GluOp glu_ = GluOp::GeGluTanh;
  float eps_ = 1e-6f, final_softcap_ = 0, embed_scale_ = 1, ple_embed_scale_ = 1;
  int64_t ple_dim_ = 0, first_shared_ = 0;
  family::ActRound rnd_;
  Weight ple_embed_, ple_proj_;
  Tensor ple_norm_;
  std::map<int64_t, Tensor> ones_;
  std::vector<Layer> layers_;
};

}  // namespace

void register_gemma4_family() {
  register_family({"gemma4_text"}, [](const ModelConfig& cfg, const WeightSource& src, const LoadOptions& o) {
    return std::make_unique<Gemma4Model>(cfg, src, o);
  });
}

}  // namespace ingot
