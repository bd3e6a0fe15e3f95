#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "tensor/half.h"
#include "util/error.h"

namespace ingot::cpu {

namespace {

Tensor as_f32(const Tensor& t) {
  Tensor c = t.contiguous();
  if (c.dtype() == DType::F32) return c;
  return c.to(DType::F32);
}

// Elementwise work per thread chunk: a decode step's vectors (a few thousand
// values) run inline instead of paying a pool round trip; prefill splits.
constexpr int64_t kElementwiseGrain = 32768;

int64_t rows_of(const Tensor& t) { return t.ndim() ? t.numel() / t.dim(-1) : 1; }

float gelu_tanh_f(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}
float gelu_f(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }
float silu_f(float x) { return x / (1.0f + std::exp(-x)); }

float apply_unary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::Silu:
      return silu_f(x);
    case UnaryOp::GeluTanh:
      return gelu_tanh_f(x);
    case UnaryOp::Gelu:
      return gelu_f(x);
    case UnaryOp::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Softplus:
      return x > 20.0f ? x : std::log1p(std::exp(x));
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Square:
      return x * x;
    case UnaryOp::Sqrt:
      return std::sqrt(x);
  }
  return x;
}

}  // namespace

namespace {

void add_bias(Tensor& y, const Tensor* bias) {
  if (!bias || !bias->defined()) return;
  Tensor b = as_f32(*bias);
  const int64_t m = y.dim(-1), n = rows_of(y);
  float* py = y.data<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) py[i * m + j] += pb[j];
}

void check_width(const Weight& w, int64_t k) {
  if (w.cols() != k)
    fail(ErrorKind::BadFormat, "linear: input width ", k, " does not match weight ", w.data.describe());
}

Tensor empty_output(const Tensor& x, int64_t m) {
  std::vector<int64_t> shape = x.shape().vec();
  shape.back() = m;
  return Tensor::empty(Shape(shape), DType::F32);
}

// The kernels that compute every weight of `w` in one pass, or nullptr: block
// weights of one format (and width) whose kernels have that form.
const QuantKernels* shared_quant_kernels(const std::vector<const Weight*>& w) {
  if (w.size() < 2 || w[0]->is_affine() || !is_quantized(w[0]->dtype())) return nullptr;
  for (const Weight* wi : w)
    if (wi->is_affine() || wi->dtype() != w[0]->dtype() || wi->cols() != w[0]->cols()) return nullptr;
  const QuantKernels* qk = quant_kernels(w[0]->dtype());
  return qk && qk->linear_many ? qk : nullptr;
}

// y = x · wᵀ (+ bias) with dense weights going to `dense` (linear_dense or linear_bulk).
using DenseFn = void (*)(const float*, int64_t, int64_t, const void*, DType, int64_t, int64_t, float*);
Tensor linear_with(const Tensor& x_in, const Weight& w, const Tensor* bias, DenseFn dense) {
  Tensor x = as_f32(x_in);
  const int64_t k = x.dim(-1);
  const int64_t n = rows_of(x);
  const int64_t m = w.rows();
  check_width(w, k);
  Tensor y = empty_output(x, m);
  if (w.is_affine() || is_quantized(w.dtype())) {
    const QuantKernels* qk = quant_kernels(w.is_affine() ? DType::U32 : w.dtype());
    if (!qk || !qk->linear)
      fail(ErrorKind::Unsupported, "no CPU kernel for ", w.is_affine() ? "affine" : dtype_name(w.dtype()),
           " weights");
    qk->linear(x.data<float>(), n, w, y.data<float>());
  } else {
    INGOT_CHECK(w.data.stride(1) == 1, "weight rows must be contiguous");
    dense(x.data<float>(), n, k, w.data.raw(), w.dtype(), w.data.stride(0), m, y.data<float>());
  }
  add_bias(y, bias);
  return y;
}

}  // namespace

Weight CpuBackend::prepare_weight(const Weight& w) {
  if (w.is_affine() || !is_quantized(w.dtype())) return w;
  const QuantKernels* qk = quant_kernels(w.dtype());
  return qk && qk->relayout ? qk->relayout(w) : w;
}

Tensor CpuBackend::linear(const Tensor& x, const Weight& w, const Tensor* bias) {
  return linear_with(x, w, bias, &linear_dense);
}

Tensor CpuBackend::linear_bulk(const Tensor& x, const Weight& w, const Tensor* bias) {
  return linear_with(x, w, bias, &cpu::linear_bulk);
}

// q/k/v (and gate/up) of one block format: x quantized once, one parallel
// pass; each output is the one linear() gives.
std::vector<Tensor> CpuBackend::linear_many(const Tensor& x_in, const std::vector<const Weight*>& w,
                                            const std::vector<const Tensor*>& bias) {
  const QuantKernels* qk = shared_quant_kernels(w);
  if (!qk) return Backend::linear_many(x_in, w, bias);
  Tensor x = as_f32(x_in);
  const int64_t k = x.dim(-1), n = rows_of(x);
  std::vector<Tensor> out;
  std::vector<float*> ys;
  for (const Weight* wi : w) {
    check_width(*wi, k);
    out.push_back(empty_output(x, wi->rows()));
    ys.push_back(out.back().data<float>());
  }
  qk->linear_many(x.data<float>(), n, w.data(), static_cast<int>(w.size()), ys.data());
  for (size_t i = 0; i < out.size(); ++i) add_bias(out[i], i < bias.size() ? bias[i] : nullptr);
  return out;
}

Tensor CpuBackend::glu_linear(GluOp op, const Tensor& x, const Weight& gate, const Weight& up, const Tensor* gate_bias,
                              const Tensor* up_bias) {
  std::vector<Tensor> gu = linear_many(x, {&gate, &up}, {gate_bias, up_bias});
  return glu(op, gu[0], gu[1]);
}

Tensor CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in) {
  // a [N, K] @ b [K, M]: as linear with bᵀ.
  Tensor a = as_f32(a_in);
  Tensor bt = as_f32(b_in.transpose(0, 1));
  Weight w;
  w.data = bt;
  return linear(a, w, nullptr);
}

Tensor CpuBackend::embedding(const Weight& table, const Tensor& ids_in) {
  Tensor ids = ids_in.contiguous();
  INGOT_CHECK(ids.dtype() == DType::I32);
  const int64_t n = ids.numel();
  const int64_t d = table.cols();
  const int64_t vocab = table.rows();
  Tensor out = Tensor::empty({n, d}, DType::F32);
  const int32_t* pid = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if (pid[i] < 0 || pid[i] >= vocab)
      fail(ErrorKind::InvalidArgument, "token id ", pid[i], " is out of range for vocabulary size ", vocab);
  const QuantKernels* qk = nullptr;
  if (table.is_affine() || is_quantized(table.dtype())) {
    qk = quant_kernels(table.is_affine() ? DType::U32 : table.dtype());
    if (!qk || !qk->dequant_row)
      fail(ErrorKind::Unsupported, "no CPU embedding kernel for this weight format");
  }
  for (int64_t i = 0; i < n; ++i) {
    float* dst = out.data<float>() + i * d;
    if (qk) {
      qk->dequant_row(table, pid[i], dst);
    } else {
      const uint8_t* src = static_cast<const uint8_t*>(table.data.raw()) +
                           static_cast<size_t>(pid[i] * table.data.stride(0)) * dtype_size(table.dtype());
      to_f32(src, table.dtype(), d, dst);
    }
  }
  return out;
}

Tensor CpuBackend::rms_norm(const Tensor& x_in, const Tensor& w_in, float eps, bool unit_offset) {
  Tensor x = as_f32(x_in);
  Tensor w = as_f32(w_in);
  const int64_t d = x.dim(-1), n = rows_of(x);
  INGOT_CHECK(w.numel() == d, "rms_norm weight ", w.describe(), " for width ", d);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  float* py = y.data<float>();
  pool().parallel_for(n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* r = px + i * d;
      float inv = 1.0f / std::sqrt(sum_squares(r, d) / static_cast<float>(d) + eps);
      scale_by(r, inv, pw, unit_offset, py + i * d, d);
    }
  });
  return y;
}

Tensor CpuBackend::layer_norm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, float eps) {
  Tensor x = as_f32(x_in);
  Tensor w = as_f32(w_in);
  Tensor b = b_in.defined() ? as_f32(b_in) : Tensor();
  const int64_t d = x.dim(-1), n = rows_of(x);
  INGOT_CHECK(w.numel() == d && (!b.defined() || b.numel() == d), "layer_norm weight ", w.describe(), " for width ", d);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* pb = b.defined() ? b.data<float>() : nullptr;
  float* py = y.data<float>();
  pool().parallel_for(n, 16, [&](int64_t bb, int64_t e) {
    for (int64_t i = bb; i < e; ++i) layer_norm_row(px + i * d, pw, pb, eps, py + i * d, d);
  });
  return y;
}

void CpuBackend::rope_inplace(Tensor& x, const Tensor& positions, const RopeSpec& spec) {
  INGOT_CHECK(x.dtype() == DType::F32 && x.is_contiguous() && x.ndim() == 3, "rope on ", x.describe());
  const int64_t t = x.dim(0), h = x.dim(1), d = x.dim(2);
  const int half = spec.rotary_dim / 2;
  INGOT_CHECK(spec.rotary_dim <= d && static_cast<int>(spec.inv_freq.size()) == half);
  Tensor pos = positions.contiguous();
  INGOT_CHECK(pos.numel() == t && pos.dtype() == DType::I32);
  float* px = x.data<float>();
  const int32_t* pp = pos.data<int32_t>();
  pool().parallel_for(t, 8, [&](int64_t tb, int64_t te) {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    for (int64_t i = tb; i < te; ++i) {
      float p = static_cast<float>(pp[i]);
      for (int j = 0; j < half; ++j) {
        float f = p * spec.inv_freq[static_cast<size_t>(j)];  // float32 product, as the reference
        cs[static_cast<size_t>(j)] = std::cos(f) * spec.attention_scaling;
        sn[static_cast<size_t>(j)] = std::sin(f) * spec.attention_scaling;
      }
      for (int64_t hh = 0; hh < h; ++hh) {
        float* r = px + (i * h + hh) * d;
        for (int j = 0; j < half; ++j) {
          int a = spec.interleaved ? 2 * j : j;
          int b = spec.interleaved ? 2 * j + 1 : j + half;
          float x0 = r[a], x1 = r[b];
          r[a] = x0 * cs[static_cast<size_t>(j)] - x1 * sn[static_cast<size_t>(j)];
          r[b] = x1 * cs[static_cast<size_t>(j)] + x0 * sn[static_cast<size_t>(j)];
        }
      }
    }
  });
}

Tensor CpuBackend::softmax(const Tensor& x_in) {
  Tensor x = as_f32(x_in);
  const int64_t d = x.dim(-1), n = rows_of(x);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  pool().parallel_for(n, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) softmax_row(px + i * d, py + i * d, d);
  });
  return y;
}

Tensor CpuBackend::unary(UnaryOp op, const Tensor& x_in) {
  Tensor x = as_f32(x_in);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  if (op == UnaryOp::Silu) {
    pool().parallel_for(x.numel(), kElementwiseGrain,
                        [&](int64_t b, int64_t e) { silu_mul(px + b, nullptr, py + b, e - b); });
    return y;
  }
  if (op == UnaryOp::Gelu) {
    pool().parallel_for(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) { gelu(px + b, py + b, e - b); });
    return y;
  }
  pool().parallel_for(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = apply_unary(op, px[i]);
  });
  return y;
}

Tensor CpuBackend::binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  Tensor a = as_f32(a_in);
  Tensor b = as_f32(b_in);
  const int64_t n = a.numel(), bn = b.numel();
  INGOT_CHECK(bn == n || bn == 1 || (bn > 0 && n % bn == 0), "binary op shapes ", a.describe(), " ",
              b.describe());
  Tensor y = Tensor::empty(a.shape(), DType::F32);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  // One loop per op (the compiler vectorises each); b indexed by i % bn when it broadcasts.
  auto apply = [&](auto f) {
    pool().parallel_for(n, kElementwiseGrain, [&](int64_t s, int64_t e) {
      if (bn == n) {
        for (int64_t i = s; i < e; ++i) py[i] = f(pa[i], pb[i]);
      } else {
        for (int64_t i = s; i < e; ++i) py[i] = f(pa[i], pb[i % bn]);
      }
    });
  };
  switch (op) {
    case BinaryOp::Add:
      apply([](float u, float v) { return u + v; });
      break;
    case BinaryOp::Sub:
      apply([](float u, float v) { return u - v; });
      break;
    case BinaryOp::Mul:
      apply([](float u, float v) { return u * v; });
      break;
    case BinaryOp::Div:
      apply([](float u, float v) { return u / v; });
      break;
  }
  return y;
}

Tensor CpuBackend::glu(GluOp op, const Tensor& g_in, const Tensor& u_in) {
  Tensor g = as_f32(g_in);
  Tensor u = as_f32(u_in);
  INGOT_CHECK(g.shape() == u.shape());
  Tensor y = Tensor::empty(g.shape(), DType::F32);
  const float* pg = g.data<float>();
  const float* pu = u.data<float>();
  float* py = y.data<float>();
  if (op == GluOp::SwiGlu) {
    pool().parallel_for(g.numel(), kElementwiseGrain,
                        [&](int64_t s, int64_t e) { silu_mul(pg + s, pu + s, py + s, e - s); });
    return y;
  }
  pool().parallel_for(g.numel(), kElementwiseGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      float a = op == GluOp::SwiGlu      ? silu_f(pg[i])
                : op == GluOp::GeGluTanh ? gelu_tanh_f(pg[i])
                                         : gelu_f(pg[i]);
      py[i] = a * pu[i];
    }
  });
  return y;
}

Tensor CpuBackend::scale(const Tensor& x_in, float s) {
  Tensor x = as_f32(x_in);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] * s;
  return y;
}

Tensor CpuBackend::softcap(const Tensor& x_in, float cap) {
  Tensor x = as_f32(x_in);
  Tensor y = Tensor::empty(x.shape(), DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::tanh(x.data<float>()[i] / cap) * cap;
  return y;
}

namespace {

// K/V stay in their stored dtype (the bf16 cache is read as is); the tile
// kernel takes one dtype for both.
Tensor attn_operand(const Tensor& t, DType want) {
  Tensor c = t.contiguous();
  return c.dtype() == want ? c : c.to(want);
}

DType attn_dtype(const Tensor& k, const Tensor& v) {
  const DType d = k.dtype();
  return d == v.dtype() && (d == DType::F32 || d == DType::BF16 || d == DType::F16) ? d : DType::F32;
}

}  // namespace

Tensor CpuBackend::attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                             const AttnParams& p_in) {
  const DType dt = attn_dtype(k_in, v_in);
  Tensor q = as_f32(q_in), k = attn_operand(k_in, dt), v = attn_operand(v_in, dt);
  const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2);
  const int64_t kvh = k.dim(1), dv = v.dim(2);
  INGOT_CHECK(k.dim(2) == d && v.dim(0) == k.dim(0) && v.dim(1) == kvh && h % kvh == 0, "attention shapes q ",
              q.describe(), " k ", k.describe(), " v ", v.describe());
  AttnParams p = p_in;
  int64_t s = k.dim(0);
  if (p.kv_len) {  // a replayable step: the first *kv_len rows are the keys
    s = *p.kv_len;
    INGOT_CHECK(s >= t && s <= k.dim(0), "attention kv_len ", s, " outside [", t, ", ", k.dim(0), "]");
    p.q_offset = s - t;
  }
  Tensor out = Tensor::empty({t, h, dv}, DType::F32);
  ContiguousKvTiles tiles(k.raw(), v.raw(), dt, kvh, d, dv);
  attention_tiled(q.data<float>(), AttnShape{t, h, kvh, d, dv, s}, tiles, p, out.data<float>());
  return out;
}

float greedy_argmax_row(const float* row, int64_t v, int64_t* out_id) {
  // log-softmax in float32, then the first maximum (PARITY.md).
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < v; ++j) mx = std::max(mx, row[j]);
  float sum = 0;
  for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
  float lse = mx + std::log(sum);
  if (!std::isfinite(lse)) {
    *out_id = 0;
    return lse;
  }
  int64_t best = 0;
  float bestv = row[0] - lse;
  for (int64_t j = 1; j < v; ++j) {
    float lv = row[j] - lse;
    if (lv > bestv) {
      bestv = lv;
      best = j;
    }
  }
  *out_id = best;
  return bestv;
}

Tensor CpuBackend::argmax(const Tensor& logits_in) {
  Tensor l = as_f32(logits_in);
  const int64_t v = l.dim(-1), n = rows_of(l);
  Tensor out = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = 0;
    greedy_argmax_row(l.data<float>() + i * v, v, &id);
    out.data<int32_t>()[i] = static_cast<int32_t>(id);
  }
  return out;
}

Tensor CpuBackend::cast(const Tensor& x, DType dtype) { return x.contiguous().to(dtype); }

Tensor CpuBackend::gather_rows(const Tensor& x_in, const std::vector<int64_t>& rows) {
  Tensor x = x_in.contiguous();
  std::vector<int64_t> shape = x.shape().vec();
  const int64_t n = shape[0];
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(Shape(shape), x.dtype());
  const size_t row_bytes = n ? x.nbytes() / static_cast<size_t>(n) : 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    INGOT_CHECK(rows[i] >= 0 && rows[i] < n);
    std::memcpy(static_cast<uint8_t*>(out.raw()) + i * row_bytes,
                static_cast<const uint8_t*>(x.raw()) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  }
  return out;
}

Tensor CpuBackend::concat_rows(const std::vector<Tensor>& parts) {
  INGOT_CHECK(!parts.empty());
  std::vector<int64_t> shape = parts[0].shape().vec();
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dim(0);
  shape[0] = total;
  Tensor out = Tensor::empty(Shape(shape), parts[0].dtype());
  size_t off = 0;
  for (const Tensor& p : parts) {
    Tensor c = p.contiguous();
    INGOT_CHECK(c.dtype() == out.dtype());
    std::memcpy(static_cast<uint8_t*>(out.raw()) + off, c.raw(), c.nbytes());
    off += c.nbytes();
  }
  return out;
}

Backend* backend() {
  static CpuBackend* b = new CpuBackend();
  return b;
}

}  // namespace ingot::cpu
