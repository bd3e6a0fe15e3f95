// Reference CPU implementations of the ops the hybrid and MoE families add:
// plain loops, float32 throughout, written for clarity over speed.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::cpu {

namespace {

Tensor f32c(const Tensor& t) {
  Tensor c = t.contiguous();
  return c.dtype() == DType::F32 ? c : c.to(DType::F32);
}

// One head's recurrence, token by token. q, k rows Dk apart (stride sq/sk
// between tokens), v rows Dv; S [Dk, Dv].
struct HeadView {
  const float *q, *k, *v, *g, *beta;
  int64_t sq, sk, sv, sg;  // element strides between consecutive tokens
  float* out;
  int64_t so;
  float* S;
};

void delta_recurrent(const HeadView& h, int64_t T, int64_t dk, int64_t dv) {
  std::vector<float> mem(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    const float* q = h.q + t * h.sq;
    const float* k = h.k + t * h.sk;
    const float* v = h.v + t * h.sv;
    const float decay = std::exp(h.g[t * h.sg]);
    const float beta = h.beta[t * h.sg];
    for (int64_t i = 0; i < dk * dv; ++i) h.S[i] *= decay;
    std::fill(mem.begin(), mem.end(), 0.0f);
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t b = 0; b < dv; ++b) mem[static_cast<size_t>(b)] += h.S[a * dv + b] * k[a];
    for (int64_t b = 0; b < dv; ++b) mem[static_cast<size_t>(b)] = (v[b] - mem[static_cast<size_t>(b)]) * beta;
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t b = 0; b < dv; ++b) h.S[a * dv + b] += k[a] * mem[static_cast<size_t>(b)];
    float* o = h.out + t * h.so;
    for (int64_t b = 0; b < dv; ++b) o[b] = 0.0f;
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t b = 0; b < dv; ++b) o[b] += h.S[a * dv + b] * q[a];
  }
}

// Chunk-parallel form. Within a chunk with cumulative log decay c_i and start
// state S0, the corrections d_i = beta_i (v_i - S_{i-1}^T k_i) satisfy a unit
// lower-triangular system
//   d_i + beta_i sum_{j<i} e^{c_i-c_j} (k_i.k_j) d_j = beta_i (v_i - e^{c_i} S0^T k_i),
// solved by forward substitution; then
//   o_i = e^{c_i} S0^T q_i + sum_{j<=i} e^{c_i-c_j} (q_i.k_j) d_j,
//   S_end = e^{c_L} S0 + sum_j e^{c_L-c_j} k_j d_j^T.
void delta_chunked(const HeadView& h, int64_t T, int64_t dk, int64_t dv, int64_t chunk) {
  std::vector<float> c(static_cast<size_t>(chunk)), d(static_cast<size_t>(chunk * dv));
  std::vector<float> kk(static_cast<size_t>(chunk * chunk)), s0k(static_cast<size_t>(dv));
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t L = std::min(chunk, T - t0);
    auto K = [&](int64_t i) { return h.k + (t0 + i) * h.sk; };
    auto Q = [&](int64_t i) { return h.q + (t0 + i) * h.sq; };
    float acc = 0;
    for (int64_t i = 0; i < L; ++i) c[static_cast<size_t>(i)] = (acc += h.g[(t0 + i) * h.sg]);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < i; ++j) {
        float dot = 0;
        for (int64_t a = 0; a < dk; ++a) dot += K(i)[a] * K(j)[a];
        kk[static_cast<size_t>(i * chunk + j)] = dot * std::exp(c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)]);
      }
    for (int64_t i = 0; i < L; ++i) {
      const float beta = h.beta[(t0 + i) * h.sg];
      const float ec = std::exp(c[static_cast<size_t>(i)]);
      std::fill(s0k.begin(), s0k.end(), 0.0f);
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t b = 0; b < dv; ++b) s0k[static_cast<size_t>(b)] += h.S[a * dv + b] * K(i)[a];
      const float* v = h.v + (t0 + i) * h.sv;
      float* di = d.data() + i * dv;
      for (int64_t b = 0; b < dv; ++b) di[b] = v[b] - ec * s0k[static_cast<size_t>(b)];
      for (int64_t j = 0; j < i; ++j) {
        const float w = kk[static_cast<size_t>(i * chunk + j)];
        const float* dj = d.data() + j * dv;
        for (int64_t b = 0; b < dv; ++b) di[b] -= w * dj[b];
      }
      for (int64_t b = 0; b < dv; ++b) di[b] *= beta;
      // Solving row i before the next row keeps the substitution exact: the
      // beta factor multiplies the whole right-hand side including the sum.
    }
    for (int64_t i = 0; i < L; ++i) {
      float* o = h.out + (t0 + i) * h.so;
      const float ec = std::exp(c[static_cast<size_t>(i)]);
      for (int64_t b = 0; b < dv; ++b) o[b] = 0.0f;
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t b = 0; b < dv; ++b) o[b] += h.S[a * dv + b] * Q(i)[a];
      for (int64_t b = 0; b < dv; ++b) o[b] *= ec;
      for (int64_t j = 0; j <= i; ++j) {
        float dot = 0;
        for (int64_t a = 0; a < dk; ++a) dot += Q(i)[a] * K(j)[a];
        const float w = dot * std::exp(c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)]);
        const float* dj = d.data() + j * dv;
        for (int64_t b = 0; b < dv; ++b) o[b] += w * dj[b];
      }
    }
    const float cl = c[static_cast<size_t>(L - 1)];
    const float el = std::exp(cl);
    for (int64_t i = 0; i < dk * dv; ++i) h.S[i] *= el;
    for (int64_t j = 0; j < L; ++j) {
      const float w = std::exp(cl - c[static_cast<size_t>(j)]);
      const float* dj = d.data() + j * dv;
      for (int64_t a = 0; a < dk; ++a) {
        const float ka = K(j)[a] * w;
        for (int64_t b = 0; b < dv; ++b) h.S[a * dv + b] += ka * dj[b];
      }
    }
  }
}

}  // namespace

Tensor CpuBackend::l2_norm(const Tensor& x_in, float eps) {
  Tensor x = f32c(x_in);
  const int64_t d = x.dim(-1), n = x.numel() / d;
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += px[i * d + j] * px[i * d + j];
    const float inv = 1.0f / std::sqrt(ss + eps);
    for (int64_t j = 0; j < d; ++j) py[i * d + j] = px[i * d + j] * inv;
  }
  return y;
}

Tensor CpuBackend::causal_conv1d(const Tensor& x_in, const Tensor& w_in, Tensor& state) {
  Tensor x = f32c(x_in), w = f32c(w_in);
  INGOT_CHECK(x.ndim() == 2 && w.ndim() == 2 && w.dim(0) == x.dim(1), "causal_conv1d x ", x.describe(), " w ",
              w.describe());
  const int64_t T = x.dim(0), C = x.dim(1), K = w.dim(1);
  INGOT_CHECK(state.dtype() == DType::F32 && state.is_contiguous() && state.dim(0) == K - 1 && state.dim(1) == C,
              "causal_conv1d state ", state.describe());
  // Inputs preceded by the saved window: row r of `full` is input r - (K-1).
  std::vector<float> full(static_cast<size_t>((T + K - 1) * C));
  std::copy(state.data<float>(), state.data<float>() + (K - 1) * C, full.begin());
  std::copy(x.data<float>(), x.data<float>() + T * C, full.begin() + (K - 1) * C);
  Tensor y = Tensor::empty({T, C}, DType::F32);
  float* py = y.data<float>();
  const float* pw = w.data<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t ch = 0; ch < C; ++ch) {
      float s = 0;
      for (int64_t j = 0; j < K; ++j) s += pw[ch * K + j] * full[static_cast<size_t>((t + j) * C + ch)];
      py[t * C + ch] = s;
    }
  std::copy(full.begin() + T * C, full.end(), state.data<float>());
  return y;
}

Tensor CpuBackend::gated_delta_rule(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& g_in,
                                    const Tensor& beta_in, Tensor& state, DeltaRuleForm form) {
  Tensor q = f32c(q_in), k = f32c(k_in), v = f32c(v_in), g = f32c(g_in), beta = f32c(beta_in);
  const int64_t T = q.dim(0), hk = q.dim(1), dk = q.dim(2), hv = v.dim(1), dv = v.dim(2);
  INGOT_CHECK(k.shape() == q.shape() && v.dim(0) == T && hv % hk == 0 && g.numel() == T * hv &&
                  beta.numel() == T * hv,
              "gated_delta_rule q ", q.describe(), " k ", k.describe(), " v ", v.describe());
  INGOT_CHECK(state.dtype() == DType::F32 && state.is_contiguous() && state.dim(0) == hv && state.dim(1) == dk &&
                  state.dim(2) == dv,
              "gated_delta_rule state ", state.describe());
  const bool chunked = form == DeltaRuleForm::Chunked || (form == DeltaRuleForm::Auto && T > 1);
  Tensor out = Tensor::empty({T, hv, dv}, DType::F32);
  const int64_t rep = hv / hk;
  pool().parallel_for(hv, 1, [&](int64_t b, int64_t e) {
    for (int64_t h = b; h < e; ++h) {
      const int64_t kh = h / rep;
      HeadView hvw{q.data<float>() + kh * dk, k.data<float>() + kh * dk, v.data<float>() + h * dv,
                   g.data<float>() + h, beta.data<float>() + h, hk * dk, hk * dk, hv * dv, hv,
                   out.data<float>() + h * dv, hv * dv, state.data<float>() + h * dk * dv};
      if (chunked)
        delta_chunked(hvw, T, dk, dv, 64);
      else
        delta_recurrent(hvw, T, dk, dv);
    }
  });
  return out;
}

void CpuBackend::scatter_add_rows(Tensor& dst, const Tensor& src_in, const std::vector<int64_t>& rows,
                                  const std::vector<float>& weights) {
  Tensor src = f32c(src_in);
  INGOT_CHECK(dst.dtype() == DType::F32 && dst.is_contiguous() && dst.ndim() == 2, "scatter_add_rows dst ",
              dst.describe());
  const int64_t n = dst.dim(0), d = dst.dim(1);
  INGOT_CHECK(src.numel() == static_cast<int64_t>(rows.size()) * d && weights.size() == rows.size());
  float* pd = dst.data<float>();
  const float* ps = src.data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    INGOT_CHECK(rows[i] >= 0 && rows[i] < n);
    float* r = pd + rows[i] * d;
    for (int64_t j = 0; j < d; ++j) r[j] += weights[i] * ps[static_cast<int64_t>(i) * d + j];
  }
}

}  // namespace ingot::cpu
