#include "models/common.h"

#include "kv/batched_rows.h"

#include "tensor/half.h"
#include "util/error.h"

namespace ingot::family {

BatchPlan plan_batch(const BatchInput& in, Device device) {
  BatchPlan p;
  p.n = in.step ? in.step->ids.numel() : static_cast<int64_t>(in.tokens.size());
  int64_t total = 0;
  for (const SeqInput& s : in.seqs) {
    INGOT_CHECK(s.cache && s.n_tokens > 0, "every sequence in a batch needs a cache and tokens");
    p.starts.push_back(total);
    for (int64_t i = 0; i < s.n_tokens; ++i)
      if (s.all_logits || i == s.n_tokens - 1) p.pick.push_back(total + i);
    total += s.n_tokens;
  }
  INGOT_CHECK(total == p.n, "batch tokens do not add up");
  if (in.step) {
    p.ids = in.step->ids;
    p.positions = in.step->positions;
    return p;
  }
  INGOT_CHECK(in.positions.size() == in.tokens.size(), "a batch needs a position for every token (BatchInput::add)");
  p.ids = Tensor::from_i32(in.tokens, {p.n}).to(device);
  p.positions = Tensor::from_i32(in.positions, {p.n}).to(device);
  return p;
}

void expect_shape(const Weight& w, int64_t rows, int64_t cols, const std::string& name) {
  if (w.rows() != rows || w.cols() != cols)
    fail(ErrorKind::BadFormat, name, ": expected [", rows, ", ", cols, "], got ", w.data.describe());
}

size_t embedding_bytes(const Weight& embed, const Weight& lm_head) {
  return embed.nbytes() + (lm_head.data.storage() != embed.data.storage() ? lm_head.nbytes() : 0);
}

Trunk load_trunk(const WeightSource& src, const ModelConfig& cfg) {
  Trunk t;
  t.embed = src.matrix("model.embed_tokens.weight");
  expect_shape(t.embed, cfg.vocab_size, cfg.hidden_size, "model.embed_tokens.weight");
  t.lm_head = t.embed;
  if (!cfg.tie_word_embeddings && src.has("lm_head.weight")) {
    t.lm_head = src.matrix("lm_head.weight");
    expect_shape(t.lm_head, cfg.vocab_size, cfg.hidden_size, "lm_head.weight");
  }
  t.final_norm = src.vector("model.norm.weight");
  expect_len(t.final_norm, cfg.hidden_size, "model.norm.weight");
  return t;
}

Tensor Trunk::logits(Tensor x, const BatchPlan& plan, const ActRound& r, float eps, bool norm_offset,
                     float softcap) const {
  if (static_cast<int64_t>(plan.pick.size()) != plan.n) x = ops::gather_rows(x, plan.pick);
  x = r(ops::rms_norm(x, final_norm, eps, norm_offset));
  Tensor out = r(ops::linear(x, lm_head));
  if (softcap > 0) out = r(ops::softcap(out, softcap));
  return ops::cast(out, DType::F32);
}

void FamilyModel::load_trunk_from(const WeightSource& src) {
  trunk_ = load_trunk(src, cfg_);
  kv_dtype_ = kv_dtype_for(trunk_.embed);
}

DType Trunk::weight_dtype() const {
  return embed.is_affine() || is_quantized(embed.dtype()) ? DType::F32 : embed.dtype();
}

void expect_len(const Tensor& t, int64_t n, const std::string& name) {
  if (t.numel() != n) fail(ErrorKind::BadFormat, name, ": expected ", n, " values, got ", t.describe());
}

Tensor attend_with_cache(const BatchInput& in, const BatchPlan& plan, int li, const Tensor& q, const Tensor& k,
                         const Tensor& v, const AttnParams& p) {
  std::vector<kv::LayerCache*> layers;
  std::vector<int64_t> n_tokens;
  for (const SeqInput& s : in.seqs) {
    layers.push_back(&s.cache->layer(li));
    n_tokens.push_back(s.n_tokens);
  }
  return kv::append_attend_batch(layers, n_tokens, q, k, v, plan.positions, p);
}

Tensor attend_shared(const BatchInput& in, const BatchPlan& plan, int li, const Tensor& q, const AttnParams& p) {
  std::vector<Tensor> outs;
  for (size_t s = 0; s < in.seqs.size(); ++s) {
    const int64_t a = plan.starts[s], b = a + in.seqs[s].n_tokens;
    outs.push_back(in.seqs[s].cache->layer(li).attend(q.slice(0, a, b).contiguous(), p));
  }
  return outs.size() == 1 ? outs[0] : ops::concat_rows(outs);
}

GluOp glu_for_activation(const std::string& act, const std::string& model_type) {
  if (act == "silu" || act == "swish") return GluOp::SwiGlu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new") return GluOp::GeGluTanh;
  if (act == "gelu") return GluOp::GeGlu;
  fail(ErrorKind::Unsupported, "config: hidden activation '", act, "' is not supported for ", model_type);
}

float round_to_dtype(float v, DType t) {
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

DType kv_dtype_for(const Weight& embed) {
  const bool f32 = !embed.is_affine() && !is_quantized(embed.dtype()) && embed.dtype() == DType::F32;
  return f32 ? DType::F32 : DType::BF16;
}

Tensor lora_linear(const Tensor& x, const Weight& w, const LoraBatch* lora, const LoraSite& site, LoraTarget t) {
  Tensor y = ops::linear(x, w);
  if (lora && !lora->empty()) lora->add(y, x, site, t);
  return y;
}

Tensor dense_mlp(GluOp act, const Tensor& h, const Weight& gate, const Weight& up, const Weight& down,
                 const ActRound& r, const LoraBatch* lora, const LoraSite& site) {
  std::vector<Tensor> gu = ops::linear_many(h, {&gate, &up}, {});
  if (lora && !lora->empty()) lora->add({{&gu[0], LoraTarget::Gate}, {&gu[1], LoraTarget::Up}}, h, site);
  Tensor g = r(gu[0]), u = r(gu[1]);
  return r(lora_linear(r(ops::glu(act, g, u)), down, lora, site, LoraTarget::Down));
}

Tensor cols(const Tensor& x, int64_t a, int64_t b) { return x.slice(x.ndim() - 1, a, b).contiguous(); }

}  // namespace ingot::family
