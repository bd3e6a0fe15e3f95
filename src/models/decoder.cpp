#include "models/decoder.h"

#include <cmath>

#include "kv/batched_rows.h"
#include "models/common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot {

DecoderOptions decoder_options_for(const ModelConfig& cfg) {
  DecoderOptions o;
  if (cfg.model_type == "qwen2") o.qkv_bias = true;
  if (cfg.model_type == "qwen3") o.qk_norm = true;
  o.qkv_bias = o.qkv_bias || cfg.attention_bias;
  o.o_bias = cfg.attention_bias && cfg.model_type != "qwen2";
  o.mlp_bias = cfg.mlp_bias;
  return o;
}

namespace {

using family::embedding_bytes;
using family::expect_shape;

void check_config(const ModelConfig& c) {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail(ErrorKind::BadFormat, "config: ", name, " must be positive (", c.model_type, ")");
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.num_hidden_layers, "num_hidden_layers");
  positive(c.num_attention_heads, "num_attention_heads");
  positive(c.num_key_value_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(ErrorKind::BadFormat, "config: num_attention_heads is not a multiple of num_key_value_heads");
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    fail(ErrorKind::Unsupported, "config: hidden_act '", c.hidden_act, "' is not supported for ", c.model_type);
}

}  // namespace

DecoderModel::DecoderModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& lopt,
                           DecoderOptions dopt)
    : FamilyModel(cfg, lopt.device), opt_(dopt), tp_(lopt.collective) {
  check_config(cfg_);
  const int64_t H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim;
  const int64_t hid = cfg_.hidden_size, inter = cfg_.intermediate_size;
  load_trunk_from(src);
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer L;
    L.attn_norm = src.vector(p + "input_layernorm.weight");
    L.mlp_norm = src.vector(p + "post_attention_layernorm.weight");
    L.wq = src.matrix(p + "self_attn.q_proj.weight");
    L.wk = src.matrix(p + "self_attn.k_proj.weight");
    L.wv = src.matrix(p + "self_attn.v_proj.weight");
    L.wo = src.matrix(p + "self_attn.o_proj.weight");
    expect_shape(L.wq, H * D, hid, p + "self_attn.q_proj.weight");
    expect_shape(L.wk, KV * D, hid, p + "self_attn.k_proj.weight");
    expect_shape(L.wv, KV * D, hid, p + "self_attn.v_proj.weight");
    expect_shape(L.wo, hid, H * D, p + "self_attn.o_proj.weight");
    if (opt_.qkv_bias) {
      L.bq = src.vector(p + "self_attn.q_proj.bias");
      L.bk = src.vector(p + "self_attn.k_proj.bias");
      L.bv = src.vector(p + "self_attn.v_proj.bias");
    }
    if (opt_.o_bias && src.has(p + "self_attn.o_proj.bias")) L.bo = src.vector(p + "self_attn.o_proj.bias");
    if (opt_.qk_norm) {
      L.q_norm = src.vector(p + "self_attn.q_norm.weight");
      L.k_norm = src.vector(p + "self_attn.k_norm.weight");
    }
    L.gate = src.matrix(p + "mlp.gate_proj.weight");
    L.up = src.matrix(p + "mlp.up_proj.weight");
    L.down = src.matrix(p + "mlp.down_proj.weight");
    expect_shape(L.gate, inter, hid, p + "mlp.gate_proj.weight");
    expect_shape(L.up, inter, hid, p + "mlp.up_proj.weight");
    expect_shape(L.down, hid, inter, p + "mlp.down_proj.weight");
    if (opt_.mlp_bias) {
      L.gate_b = src.vector(p + "mlp.gate_proj.bias");
      L.up_b = src.vector(p + "mlp.up_proj.bias");
      L.down_b = src.vector(p + "mlp.down_proj.bias");
    }
    for (const Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) weight_bytes_ += w->nbytes();
    layers_.push_back(std::move(L));
  }
  weight_bytes_ += trunk_.bytes();
  rope_ = make_rope_spec(cfg_.rope_for("full_attention"), static_cast<int>(D), opt_.interleaved_rope);
  window_ = cfg_.sliding_window > 0 && cfg_.model_type == "mistral" ? cfg_.sliding_window : 0;
}

std::vector<kv::LayerSpec> DecoderModel::cache_layout() const {
  kv::LayerSpec s;
  s.kv_heads = cfg_.num_key_value_heads;
  s.head_dim = cfg_.head_dim;
  s.v_head_dim = cfg_.head_dim;
  s.window = window_;
  return std::vector<kv::LayerSpec>(static_cast<size_t>(cfg_.num_hidden_layers), s);
}

bool DecoderModel::lora_targets(LoraTargets& out) const {
  // Under tensor parallelism each rank holds a slice of every projection.
  if (tp_) return false;
  family::lora_targets_from(out, cfg_, kv_dtype_, layers_);
  return true;
}

Tensor DecoderModel::attention_block(const Layer& L, int li, const Tensor& h, const Tensor& positions,
                                     const BatchInput& in, const LoraBatch& lora) {
  const int64_t N = h.dim(0), H = cfg_.num_attention_heads, KV = cfg_.num_key_value_heads, D = cfg_.head_dim;
  std::vector<const Tensor*> qkv_bias;
  if (opt_.qkv_bias) qkv_bias = {&L.bq, &L.bk, &L.bv};
  std::vector<Tensor> qkv = ops::linear_many(h, {&L.wq, &L.wk, &L.wv}, qkv_bias);
  lora.add({{&qkv[0], LoraTarget::Q}, {&qkv[1], LoraTarget::K}, {&qkv[2], LoraTarget::V}}, h, LoraSite{li});
  Tensor q = qkv[0].reshape({N, H, D});
  Tensor k = qkv[1].reshape({N, KV, D});
  Tensor v = qkv[2].reshape({N, KV, D});
  if (opt_.qk_norm) {
    q = ops::rms_norm(q, L.q_norm, static_cast<float>(cfg_.rms_norm_eps));
    k = ops::rms_norm(k, L.k_norm, static_cast<float>(cfg_.rms_norm_eps));
  }
  ops::rope_pair_inplace(q, k, positions, rope_);
  AttnParams ap;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  ap.window = window_;
  std::vector<kv::LayerCache*> layers;
  std::vector<int64_t> n_tokens;
  for (const SeqInput& s : in.seqs) {
    layers.push_back(&s.cache->layer(li));
    n_tokens.push_back(s.n_tokens);
  }
  if (!in.step) return kv::append_attend_batch(layers, n_tokens, q, k, v, positions, ap).reshape({N, H * D});
  // A captured step (decode rows only): keys are written at the device
  // positions and counted by the device key lengths, all rows in one launch
  // where the stores allow.
  kv::StepRows rows{&in.step->kv_lens};
  if (in.step->tables.defined()) {
    rows.tables = in.step->tables.slice(0, li, li + 1).reshape({N});
    rows.max_keys = in.step->max_keys;
  }
  Tensor o = kv::append_attend_rows(layers, q, k, v, positions, &rows, ap);
  if (o.defined()) return o.reshape({N, H * D});
  std::vector<Tensor> outs;
  for (size_t si = 0; si < in.seqs.size(); ++si) {
    const auto j = static_cast<int64_t>(si);
    Tensor qs = q.slice(0, j, j + 1).contiguous();
    layers[si]->append_at(k.slice(0, j, j + 1), v.slice(0, j, j + 1), positions.slice(0, j, j + 1));
    outs.push_back(layers[si]->attend_upto(qs, ap, in.step->kv_lens.slice(0, j, j + 1)));
  }
  o = outs.size() == 1 ? outs[0] : ops::concat_rows(outs);
  return o.reshape({N, H * D});
}

Tensor DecoderModel::forward(const BatchInput& in) {
  const family::BatchPlan plan = family::plan_batch(in, device_);
  const int64_t N = plan.n;
  const Tensor& positions = plan.positions;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Adapters stay beside the base weights: each projection adds its rows'
  // low-rank updates after the base product (nothing to do for a base-only batch).
  const LoraBatch lora(in);
  INGOT_CHECK(lora.empty() || (!in.step && !tp_), "LoRA rows in a captured step or a tensor-parallel model");
  Tensor x = ops::embedding(trunk_.embed, plan.ids);
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    const int64_t l = static_cast<int64_t>(li);
    Tensor h = ops::rms_norm(x, L.attn_norm, eps);
    Tensor o = attention_block(L, static_cast<int>(li), h, positions, in, lora);
    x = row_parallel_residual(o, L.wo, L.bo.defined() ? &L.bo : nullptr, x);
    lora.add(x, o, l, LoraTarget::O);
    h = ops::rms_norm(x, L.mlp_norm, eps);
    const Tensor* gate_b = L.gate_b.defined() ? &L.gate_b : nullptr;
    const Tensor* up_b = L.up_b.defined() ? &L.up_b : nullptr;
    Tensor a;
    if (lora.empty()) {
      a = ops::glu_linear(GluOp::SwiGlu, h, L.gate, L.up, gate_b, up_b);
    } else {
      std::vector<Tensor> gu = ops::linear_many(h, {&L.gate, &L.up}, {gate_b, up_b});
      lora.add({{&gu[0], LoraTarget::Gate}, {&gu[1], LoraTarget::Up}}, h, LoraSite{l});
      a = ops::glu(GluOp::SwiGlu, gu[0], gu[1]);
    }
    x = row_parallel_residual(a, L.down, L.down_b.defined() ? &L.down_b : nullptr, x);
    lora.add(x, a, l, LoraTarget::Down);
  }
  if (static_cast<int64_t>(plan.pick.size()) != N) x = ops::gather_rows(x, plan.pick);
  x = ops::rms_norm(x, trunk_.final_norm, eps);
  if (in.hidden_states) return ops::cast(x, DType::F32);
  return ops::cast(ops::linear(x, trunk_.lm_head), DType::F32);
}

Tensor DecoderModel::row_parallel_residual(const Tensor& a, const Weight& w, const Tensor* b,
                                           const Tensor& residual) const {
  if (!tp_) return ops::linear_residual(a, w, b, residual);
  // Each rank holds a slice of the input columns: sum the partial products,
  // adding the residual on one rank only.
  Tensor part = tp_->rank() == 0 ? ops::linear_residual(a, w, b, residual) : ops::linear(a, w, b);
  return tp_->all_reduce_sum(part);
}

void register_decoder_family() {
  register_family({"llama", "mistral", "qwen2", "qwen3"},
                  [](const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt) {
                    return std::make_unique<DecoderModel>(cfg, src, opt, decoder_options_for(cfg));
                  });
}

}  // namespace ingot
