#include "models/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/common.h"
#include "util/error.h"

namespace ingot::family {

size_t MoeBlock::nbytes() const {
  size_t b = router.nbytes();
  for (int64_t e = 0; e < num_experts(); ++e)
    b += gate[static_cast<size_t>(e)].nbytes() + up[static_cast<size_t>(e)].nbytes() +
         down[static_cast<size_t>(e)].nbytes();
  for (const Weight* w : {&shared_gate, &shared_up, &shared_down, &shared_router})
    if (w->defined()) b += w->nbytes();
  return b;
}

MoeBlock load_moe(const WeightSource& src, const std::string& p, int64_t experts, int64_t hidden, int64_t inter,
                  int64_t shared_inter, int64_t top_k, bool norm_topk, GluOp act) {
  if (experts <= 0 || top_k <= 0 || top_k > experts || inter <= 0)
    fail(ErrorKind::BadFormat, "config: bad MoE sizes (experts ", experts, ", top_k ", top_k, ", size ", inter, ")");
  MoeBlock m;
  m.top_k = top_k;
  m.norm_topk = norm_topk;
  m.act = act;
  m.router = src.matrix(p + "gate.weight");
  expect_shape(m.router, experts, hidden, p + "gate.weight");
  m.weight_dtype = m.router.is_affine() || is_quantized(m.router.dtype()) ? DType::F32 : m.router.dtype();
  for (int64_t e = 0; e < experts; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    m.gate.push_back(src.matrix(q + "gate_proj.weight"));
    m.up.push_back(src.matrix(q + "up_proj.weight"));
    m.down.push_back(src.matrix(q + "down_proj.weight"));
    expect_shape(m.gate.back(), inter, hidden, q + "gate_proj.weight");
    expect_shape(m.up.back(), inter, hidden, q + "up_proj.weight");
    expect_shape(m.down.back(), hidden, inter, q + "down_proj.weight");
  }
  if (shared_inter > 0 && src.has(p + "shared_expert.gate_proj.weight")) {
    m.shared_gate = src.matrix(p + "shared_expert.gate_proj.weight");
    m.shared_up = src.matrix(p + "shared_expert.up_proj.weight");
    m.shared_down = src.matrix(p + "shared_expert.down_proj.weight");
    expect_shape(m.shared_gate, shared_inter, hidden, p + "shared_expert.gate_proj.weight");
    expect_shape(m.shared_up, shared_inter, hidden, p + "shared_expert.up_proj.weight");
    expect_shape(m.shared_down, hidden, shared_inter, p + "shared_expert.down_proj.weight");
    if (src.has(p + "shared_expert_gate.weight")) {
      m.shared_router = src.matrix(p + "shared_expert_gate.weight");
      expect_shape(m.shared_router, 1, hidden, p + "shared_expert_gate.weight");
    }
  }
  return m;
}

Routing route(const MoeBlock& m, const Tensor& h, const ActRound& rd) {
  const int64_t n = h.dim(0), E = m.num_experts(), K = m.top_k;
  std::vector<float> logits = rd(ops::linear(h, m.router)).to(Device::CPU).to_f32_vector();
  Routing r;
  r.expert.resize(static_cast<size_t>(n * K));
  r.weight.resize(static_cast<size_t>(n * K));
  std::vector<float> prob(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits.data() + t * E;
    float mx = *std::max_element(row, row + E), sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (prob[static_cast<size_t>(e)] = std::exp(row[e] - mx));
    for (float& v : prob) v /= sum;
    std::iota(order.begin(), order.end(), 0);
    // Exact ties (common with bf16 router logits) go to the higher expert
    // index, as the reference's top-k on the GPU resolved them in our goldens.
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const float pa = prob[static_cast<size_t>(a)], pb = prob[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a > b);
    });
    float top = 0;
    for (int64_t k = 0; k < K; ++k) top += prob[static_cast<size_t>(order[static_cast<size_t>(k)])];
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = order[static_cast<size_t>(k)];
      float w = prob[static_cast<size_t>(e)];
      if (m.norm_topk) w /= top;
      r.expert[static_cast<size_t>(t * K + k)] = e;
      r.weight[static_cast<size_t>(t * K + k)] = round_to_dtype(w, m.weight_dtype);
    }
  }
  return r;
}

namespace {

Tensor expert_mlp(const MoeBlock& m, size_t e, const Tensor& x, const ActRound& r) {
  return dense_mlp(m.act, x, m.gate[e], m.up[e], m.down[e], r);
}

void add_shared(const MoeBlock& m, const Tensor& h, Tensor& out, const ActRound& r) {
  if (!m.shared_gate.defined()) return;
  const int64_t n = h.dim(0);
  Tensor s = dense_mlp(m.act, h, m.shared_gate, m.shared_up, m.shared_down, r);
  std::vector<float> w(static_cast<size_t>(n), 1.0f);
  if (m.shared_router.defined()) {
    w = r(ops::sigmoid(r(ops::linear(h, m.shared_router)))).to(Device::CPU).to_f32_vector();
  }
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  ops::scatter_add_rows(out, s, rows, w);
}

}  // namespace

LoraTargets::Experts lora_experts(const MoeBlock& m) {
  LoraTargets::Experts e;
  if (m.num_experts() == 0) return e;
  const Weight none;
  e.count = m.num_experts();
  e.shape = lora_shapes(none, none, none, none, m.gate[0], m.up[0], m.down[0]);
  return e;
}

Tensor moe_forward(const MoeBlock& m, const Tensor& h, const ActRound& r, const LoraBatch* lora, int64_t layer) {
  const int64_t n = h.dim(0), K = m.top_k;
  Routing rt = route(m, h, r);
  // Group the (token, weight) pairs by expert; tokens stay in ascending order.
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(m.num_experts()));
  std::vector<std::vector<float>> weights(static_cast<size_t>(m.num_experts()));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const size_t e = static_cast<size_t>(rt.expert[static_cast<size_t>(t * K + k)]);
      rows[e].push_back(t);
      weights[e].push_back(rt.weight[static_cast<size_t>(t * K + k)]);
    }
  Tensor out = Tensor::zeros({n, h.dim(1)}, DType::F32, h.device());
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows[e].empty()) continue;
    Tensor x = static_cast<int64_t>(rows[e].size()) == n ? h : ops::gather_rows(h, rows[e]);
    Tensor y = lora ? dense_mlp(m.act, x, m.gate[e], m.up[e], m.down[e], r, lora,
                                LoraSite{layer, static_cast<int64_t>(e), &rows[e]})
                    : expert_mlp(m, e, x, r);
    ops::scatter_add_rows(out, y, rows[e], weights[e]);
  }
  add_shared(m, h, out, r);
  return out;
}

Tensor moe_forward_naive(const MoeBlock& m, const Tensor& h, const ActRound& r) {
  const int64_t n = h.dim(0), K = m.top_k;
  Routing rt = route(m, h, r);
  Tensor out = Tensor::zeros({n, h.dim(1)}, DType::F32, h.device());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const size_t e = static_cast<size_t>(rt.expert[static_cast<size_t>(t * K + k)]);
      Tensor y = expert_mlp(m, e, ops::gather_rows(h, {t}), r);
      ops::scatter_add_rows(out, y, {t}, {rt.weight[static_cast<size_t>(t * K + k)]});
    }
  add_shared(m, h, out, r);
  return out;
}

}  // namespace ingot::family
