#include "models/gated_deltanet.h"

#include <cmath>

#include "util/error.h"

namespace ingot::family {

kv::LayerSpec DeltaNetLayer::cache_spec() const {
  kv::LayerSpec s;
  s.kind = kv::LayerKind::LinearState;
  s.conv_channels = channels();
  s.conv_kernel = kernel;
  s.state_heads = nv;
  s.state_k_dim = dk;
  s.state_v_dim = dv;
  return s;
}

size_t DeltaNetLayer::nbytes() const {
  return in_qkv.nbytes() + in_z.nbytes() + in_b.nbytes() + in_a.nbytes() + out_proj.nbytes();
}

namespace {

// Rows `rows` of a weight (all its parts are row-major by output row).
Weight take_rows(const Weight& w, const std::vector<int64_t>& rows) {
  Weight o = w;
  o.data = ops::gather_rows(w.data, rows);
  if (w.scales.defined()) o.scales = ops::gather_rows(w.scales, rows);
  if (w.biases.defined()) o.biases = ops::gather_rows(w.biases, rows);
  return o;
}

}  // namespace

DeltaNetLayer load_deltanet(const WeightSource& src, const std::string& p, const ModelConfig& cfg, bool fused,
                            Device device) {
  DeltaNetLayer L;
  L.nk = cfg.get_int("linear_num_key_heads", 0);
  L.nv = cfg.get_int("linear_num_value_heads", 0);
  L.dk = cfg.get_int("linear_key_head_dim", 0);
  L.dv = cfg.get_int("linear_value_head_dim", 0);
  L.kernel = cfg.get_int("linear_conv_kernel_dim", 4);
  L.eps = static_cast<float>(cfg.rms_norm_eps);
  if (L.nk <= 0 || L.nv <= 0 || L.dk <= 0 || L.dv <= 0 || L.kernel <= 0 || L.nv % L.nk)
    fail(ErrorKind::BadFormat, "config: bad linear-attention sizes (heads ", L.nk, "/", L.nv, ", dims ", L.dk, "/",
         L.dv, ")");
  const int64_t hid = cfg.hidden_size, kd = L.key_dim(), vd = L.value_dim(), r = L.nv / L.nk;
  if (fused) {
    // Per key head g: [q (dk) | k (dk) | v (r*dv) | z (r*dv)] and [b (r) | a (r)].
    Weight qkvz = src.matrix(p + "in_proj_qkvz.weight");
    expect_shape(qkvz, 2 * kd + 2 * vd, hid, p + "in_proj_qkvz.weight");
    const int64_t group = 2 * L.dk + 2 * r * L.dv;
    std::vector<int64_t> q, k, v, z;
    for (int64_t g = 0; g < L.nk; ++g) {
      const int64_t o = g * group;
      for (int64_t i = 0; i < L.dk; ++i) q.push_back(o + i), k.push_back(o + L.dk + i);
      for (int64_t i = 0; i < r * L.dv; ++i) v.push_back(o + 2 * L.dk + i), z.push_back(o + 2 * L.dk + r * L.dv + i);
    }
    std::vector<int64_t> qkv = q;
    qkv.insert(qkv.end(), k.begin(), k.end());
    qkv.insert(qkv.end(), v.begin(), v.end());
    L.in_qkv = take_rows(qkvz, qkv);
    L.in_z = take_rows(qkvz, z);
    Weight ba = src.matrix(p + "in_proj_ba.weight");
    expect_shape(ba, 2 * L.nv, hid, p + "in_proj_ba.weight");
    std::vector<int64_t> b, a;
    for (int64_t g = 0; g < L.nk; ++g)
      for (int64_t i = 0; i < r; ++i) b.push_back(g * 2 * r + i), a.push_back(g * 2 * r + r + i);
    L.in_b = take_rows(ba, b);
    L.in_a = take_rows(ba, a);
  } else {
    L.in_qkv = src.matrix(p + "in_proj_qkv.weight");
    L.in_z = src.matrix(p + "in_proj_z.weight");
    L.in_b = src.matrix(p + "in_proj_b.weight");
    L.in_a = src.matrix(p + "in_proj_a.weight");
    expect_shape(L.in_qkv, 2 * kd + vd, hid, p + "in_proj_qkv.weight");
    expect_shape(L.in_z, vd, hid, p + "in_proj_z.weight");
    expect_shape(L.in_b, L.nv, hid, p + "in_proj_b.weight");
    expect_shape(L.in_a, L.nv, hid, p + "in_proj_a.weight");
  }
  L.out_proj = src.matrix(p + "out_proj.weight");
  expect_shape(L.out_proj, hid, vd, p + "out_proj.weight");
  Tensor conv = src.raw(p + "conv1d.weight").to(DType::F32).contiguous();  // [C, 1, K]
  if (conv.numel() != L.channels() * L.kernel)
    fail(ErrorKind::BadFormat, p, "conv1d.weight: expected [", L.channels(), ", 1, ", L.kernel, "], got ",
         conv.describe());
  L.conv_w = conv.reshape({L.channels(), L.kernel}).to(device);
  std::vector<float> alog = src.vector(p + "A_log").to(Device::CPU).to_f32_vector();
  if (static_cast<int64_t>(alog.size()) != L.nv) fail(ErrorKind::BadFormat, p, "A_log: expected ", L.nv, " values");
  for (float& x : alog) x = -std::exp(x);
  L.neg_a = Tensor::from_f32(alog, {L.nv}).to(device);
  L.dt_bias = src.vector(p + "dt_bias");
  expect_len(L.dt_bias, L.nv, p + "dt_bias");
  L.norm_w = src.vector(p + "norm.weight");
  expect_len(L.norm_w, L.dv, p + "norm.weight");
  return L;
}

Tensor deltanet_forward(const DeltaNetLayer& L, const Tensor& h, const BatchInput& in, const BatchPlan& plan,
                        int li, const ActRound& r, DeltaRuleForm form) {
  const int64_t N = plan.n, kd = L.key_dim(), vd = L.value_dim();
  Tensor qkv = r(ops::linear(h, L.in_qkv));
  Tensor z = r(ops::linear(h, L.in_z));
  Tensor beta = r(ops::sigmoid(r(ops::linear(h, L.in_b))));
  // The decay is computed in float32 by the reference.
  Tensor g = ops::mul(ops::unary(UnaryOp::Softplus, ops::add(r(ops::linear(h, L.in_a)), L.dt_bias)), L.neg_a);
  const float qscale = 1.0f / std::sqrt(static_cast<float>(L.dk));
  std::vector<Tensor> outs;
  for (size_t s = 0; s < in.seqs.size(); ++s) {
    const int64_t a = plan.starts[s], b = a + in.seqs[s].n_tokens, T = b - a;
    kv::LinearState* st = in.seqs[s].cache->layer(li).linear_state();
    INGOT_CHECK(st, "cache layer ", li, " is not a linear-state store");
    Tensor x = r(ops::silu(r(ops::causal_conv1d(qkv.slice(0, a, b).contiguous(), L.conv_w, st->conv_state()))));
    Tensor q = ops::scale(ops::l2_norm(cols(x, 0, kd).reshape({T, L.nk, L.dk}), 1e-6f), qscale);
    Tensor k = ops::l2_norm(cols(x, kd, 2 * kd).reshape({T, L.nk, L.dk}), 1e-6f);
    Tensor v = cols(x, 2 * kd, 2 * kd + vd).reshape({T, L.nv, L.dv});
    outs.push_back(ops::gated_delta_rule(q, k, v, g.slice(0, a, b).contiguous(), beta.slice(0, a, b).contiguous(),
                                         st->ssm_state(), form));
    st->advance(T);
  }
  Tensor o = r(outs.size() == 1 ? outs[0] : ops::concat_rows(outs));
  o = r(ops::mul(r(ops::rms_norm(o, L.norm_w, L.eps)), ops::silu(z.reshape({N, L.nv, L.dv}))));
  return r(ops::linear(o.reshape({N, vd}), L.out_proj));
}

}  // namespace ingot::family
