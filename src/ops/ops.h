// Free functions over Tensors that dispatch to the inputs' device backend.
// Model code is written only against these.
#pragma once
#include "ops/backend.h"

namespace ingot::ops {

inline Backend& be(const Tensor& t) { return backend(t.device()); }

inline Weight prepare_weight(const Weight& w) { return be(w.data).prepare_weight(w); }
inline Tensor linear(const Tensor& x, const Weight& w, const Tensor* bias = nullptr) {
  return be(x).linear(x, w, bias);
}
inline Tensor matmul(const Tensor& a, const Tensor& b) { return be(a).matmul(a, b); }
inline Tensor linear_bulk(const Tensor& x, const Weight& w, const Tensor* bias = nullptr) {
  return be(x).linear_bulk(x, w, bias);
}
inline Tensor embedding(const Weight& t, const Tensor& ids) { return backend(t.device()).embedding(t, ids); }
inline Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool unit_offset = false) {
  return be(x).rms_norm(x, w, eps, unit_offset);
}
inline Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  return be(x).layer_norm(x, w, b, eps);
}
inline void rope_inplace(Tensor& x, const Tensor& pos, const RopeSpec& s) { be(x).rope_inplace(x, pos, s); }
inline Tensor softmax(const Tensor& x) { return be(x).softmax(x); }
inline Tensor silu(const Tensor& x) { return be(x).unary(UnaryOp::Silu, x); }
inline Tensor gelu_tanh(const Tensor& x) { return be(x).unary(UnaryOp::GeluTanh, x); }
inline Tensor gelu(const Tensor& x) { return be(x).unary(UnaryOp::Gelu, x); }
inline Tensor sigmoid(const Tensor& x) { return be(x).unary(UnaryOp::Sigmoid, x); }
inline Tensor unary(UnaryOp op, const Tensor& x) { return be(x).unary(op, x); }
inline Tensor add(const Tensor& a, const Tensor& b) { return be(a).binary(BinaryOp::Add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return be(a).binary(BinaryOp::Sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return be(a).binary(BinaryOp::Mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return be(a).binary(BinaryOp::Div, a, b); }
inline Tensor swiglu(const Tensor& g, const Tensor& u) { return be(g).glu(GluOp::SwiGlu, g, u); }
inline Tensor geglu_tanh(const Tensor& g, const Tensor& u) { return be(g).glu(GluOp::GeGluTanh, g, u); }
inline Tensor glu(GluOp op, const Tensor& g, const Tensor& u) { return be(g).glu(op, g, u); }
inline Tensor scale(const Tensor& x, float s) { return be(x).scale(x, s); }
inline Tensor softcap(const Tensor& x, float cap) { return be(x).softcap(x, cap); }
inline Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnParams& p) {
  return be(q).attention(q, k, v, p);
}
inline Tensor argmax(const Tensor& logits) { return be(logits).argmax(logits); }
inline Tensor cast(const Tensor& x, DType t) { return be(x).cast(x, t); }
inline Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& r) { return be(x).gather_rows(x, r); }
inline Tensor concat_rows(const std::vector<Tensor>& p) { return be(p.at(0)).concat_rows(p); }
inline Tensor l2_norm(const Tensor& x, float eps) { return be(x).l2_norm(x, eps); }
inline Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state) {
  return be(x).causal_conv1d(x, w, state);
}
inline Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               Tensor& state, DeltaRuleForm form = DeltaRuleForm::Auto) {
  return be(q).gated_delta_rule(q, k, v, g, beta, state, form);
}
inline void scatter_add_rows(Tensor& dst, const Tensor& src, const std::vector<int64_t>& rows,
                             const std::vector<float>& w) {
  be(dst).scatter_add_rows(dst, src, rows, w);
}
inline void low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x) {
  if (!outs.empty()) be(x).low_rank_add(outs, x);
}
inline void low_rank_add(Tensor& y, const Tensor& x, const std::vector<LowRankGroup>& groups) {
  if (!groups.empty()) low_rank_add({LowRankOutput{&y, groups}}, x);
}
inline Tensor linear_residual(const Tensor& x, const Weight& w, const Tensor* bias, const Tensor& residual) {
  return be(x).linear_residual(x, w, bias, residual);
}
inline Tensor glu_linear(GluOp op, const Tensor& x, const Weight& gate, const Weight& up,
                         const Tensor* gate_bias = nullptr, const Tensor* up_bias = nullptr) {
  return be(x).glu_linear(op, x, gate, up, gate_bias, up_bias);
}
inline std::vector<Tensor> linear_many(const Tensor& x, const std::vector<const Weight*>& w,
                                       const std::vector<const Tensor*>& bias = {}) {
  return be(x).linear_many(x, w, bias);
}
inline void rope_pair_inplace(Tensor& a, Tensor& b, const Tensor& positions, const RopeSpec& spec) {
  be(a).rope_pair_inplace(a, b, positions, spec);
}
inline void write_rows_at(Tensor& dst, const Tensor& src, const Tensor& rows) { be(dst).write_rows_at(dst, src, rows); }
inline void write_rows_at_pair(Tensor& dst0, const Tensor& src0, Tensor& dst1, const Tensor& src1,
                               const Tensor& rows) {
  be(dst0).write_rows_at_pair(dst0, src0, dst1, src1, rows);
}
inline void add_i32_inplace(Tensor& x, int32_t v) { be(x).add_i32_inplace(x, v); }

}  // namespace ingot::ops
