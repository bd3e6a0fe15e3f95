// Elementwise, normalisation, rope, softmax, argmax and copy kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/runtime.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

__device__ inline float load_as_f32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::F16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::I32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    default: return 0.0f;
  }
}

__device__ inline void store_from_f32(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = v; break;
    case DType::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case DType::F16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    default: break;
  }
}

__global__ void cast_kernel(const void* src, DType st, void* dst, DType dt, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) store_from_f32(dst, dt, i, load_as_f32(src, st, i));
}

__global__ void embedding_kernel(const void* table, DType tdt, int64_t stride, const int32_t* ids, int64_t d,
                                 float* out) {
  int64_t r = blockIdx.y;
  int64_t base = static_cast<int64_t>(ids[r]) * stride;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < d; c += int64_t(gridDim.x) * blockDim.x)
    out[r * d + c] = load_as_f32(table, tdt, base + c);
}

// Block-wide sum; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  int nw = (blockDim.x + 31) >> 5;
  float t = lane < nw ? warp_sums[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffff, t, o);
  return t;
}

__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  int nw = (blockDim.x + 31) >> 5;
  float t = lane < nw ? warp_max[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffff, t, o));
  return t;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t d, float eps, bool unit) {
  let_next_kernel_start();  // a GEMV after the norm may be scheduled meanwhile (pdl.cuh)
  const float* r = x + blockIdx.x * d;
  float ss = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += r[j] * r[j];
  ss = block_sum(ss);
  float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    y[blockIdx.x * d + j] = (r[j] * inv) * (unit ? 1.0f + w[j] : w[j]);
}

__global__ void l2_norm_kernel(const float* x, float* y, int64_t d, float eps) {
  const float* r = x + blockIdx.x * d;
  float ss = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += r[j] * r[j];
  const float inv = 1.0f / sqrtf(block_sum(ss) + eps);  // as the CPU: a divide, not rsqrtf
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) y[blockIdx.x * d + j] = r[j] * inv;
}

__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* y, int64_t d, float eps) {
  const float* r = x + blockIdx.x * d;
  float s = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += r[j];
  float mean = block_sum(s) / static_cast<float>(d);
  float v = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) v += (r[j] - mean) * (r[j] - mean);
  float inv = rsqrtf(block_sum(v) / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    y[blockIdx.x * d + j] = (r[j] - mean) * inv * w[j] + (b ? b[j] : 0.0f);
}

struct RopeArgs {
  float inv_freq[256];
  int half;
  float scaling;
  bool interleaved;
};

// One block per (token, head): decode has a single token, so a block per
// token alone left the GPU idle while one block walked every head.
// Heads past h belong to a second tensor x2 [t, h2, d] (q and k rotated in one launch).
__global__ void rope_kernel(float* x, int64_t h, float* x2, int64_t h2, const int32_t* pos, int64_t d, RopeArgs a) {
  int64_t t = blockIdx.x;
  int64_t hh = blockIdx.y;
  if (hh >= h) {
    x = x2;
    hh -= h;
    h = h2;
  }
  float p = static_cast<float>(pos[t]);
  for (int j = threadIdx.x; j < a.half; j += blockDim.x) {
    float f = p * a.inv_freq[j];
    float c = cosf(f) * a.scaling, s = sinf(f) * a.scaling;
    float* r = x + (t * h + hh) * d;
    int i0 = a.interleaved ? 2 * j : j;
    int i1 = a.interleaved ? 2 * j + 1 : j + a.half;
    float x0 = r[i0], x1 = r[i1];
    r[i0] = x0 * c - x1 * s;
    r[i1] = x1 * c + x0 * s;
  }
}

constexpr int kArgmaxParts = 64;         // blocks per row for large vocabularies
constexpr int64_t kArgmaxSplitMin = 16384;  // smaller rows: one block

// Lowest index among equal values wins (PARITY.md).
__device__ inline void take_better(float& b, int64_t& i, float ob, int64_t oi) {
  if (ob > b || (ob == b && oi < i)) {
    b = ob;
    i = oi;
  }
}

// Pass 1: each part's max and sum of exp(x - max) (blockDim.x == 256).
__global__ void argmax_lse_part_kernel(const float* x, int64_t v, float* ml) {
  const float* r = x + blockIdx.y * v;
  const int64_t chunk = (v + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * chunk, hi = min(v, lo + chunk);
  float m = -INFINITY;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_max(m);
  float s = 0;
  if (m > -INFINITY)
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) s += expf(r[j] - m);
  s = block_sum(s);
  if (threadIdx.x == 0) {
    ml[2 * (blockIdx.y * gridDim.x + blockIdx.x)] = m;
    ml[2 * (blockIdx.y * gridDim.x + blockIdx.x) + 1] = s;
  }
}

__device__ inline float merged_lse(const float* ml, int parts) {
  float m = -INFINITY;
  for (int p = 0; p < parts; ++p) m = fmaxf(m, ml[2 * p]);
  float s = 0;
  for (int p = 0; p < parts; ++p)
    if (ml[2 * p] > -INFINITY) s += ml[2 * p + 1] * expf(ml[2 * p] - m);
  return m + logf(s);
}

// Pass 2: each part's best (x - lse) and its lowest index.
__global__ void argmax_pick_part_kernel(const float* x, int64_t v, const float* ml, float* best, int64_t* idx) {
  const float* r = x + blockIdx.y * v;
  const float lse = merged_lse(ml + 2 * blockIdx.y * gridDim.x, gridDim.x);
  const int64_t chunk = (v + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * chunk, hi = min(v, lo + chunk);
  float b = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) take_better(b, bi, r[j] - lse, j);
  __shared__ float sb[256];
  __shared__ int64_t si[256];
  sb[threadIdx.x] = b;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) take_better(sb[threadIdx.x], si[threadIdx.x], sb[threadIdx.x + w], si[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    best[blockIdx.y * gridDim.x + blockIdx.x] = sb[0];
    idx[blockIdx.y * gridDim.x + blockIdx.x] = si[0];
  }
}

// Pass 3: one block per row merges the parts (blockDim.x == parts, a power of two).
__global__ void argmax_final_kernel(const float* ml, const float* best, const int64_t* idx, int32_t* out) {
  const int parts = blockDim.x;
  __shared__ float sb[kArgmaxParts];
  __shared__ int64_t si[kArgmaxParts];
  sb[threadIdx.x] = best[blockIdx.x * parts + threadIdx.x];
  si[threadIdx.x] = idx[blockIdx.x * parts + threadIdx.x];
  __syncthreads();
  for (int w = parts / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) take_better(sb[threadIdx.x], si[threadIdx.x], sb[threadIdx.x + w], si[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float lse = merged_lse(ml + 2 * blockIdx.x * parts, parts);
    out[blockIdx.x] = (!isfinite(lse) || si[0] == INT64_MAX) ? 0 : static_cast<int32_t>(si[0]);
  }
}

__global__ void softmax_kernel(const float* x, float* y, int64_t d) {
  const float* r = x + blockIdx.x * d;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_max(m);
  float s = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += expf(r[j] - m);
  s = block_sum(s);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) y[blockIdx.x * d + j] = expf(r[j] - m) / s;
}

__device__ inline float gelu_tanh_d(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
__device__ inline float gelu_d(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
__device__ inline float silu_d(float x) { return x / (1.0f + expf(-x)); }

__global__ void unary_kernel(UnaryOp op, const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = x[i], r = v;
  switch (op) {
    case UnaryOp::Silu: r = silu_d(v); break;
    case UnaryOp::GeluTanh: r = gelu_tanh_d(v); break;
    case UnaryOp::Gelu: r = gelu_d(v); break;
    case UnaryOp::Sigmoid: r = 1.0f / (1.0f + expf(-v)); break;
    case UnaryOp::Exp: r = expf(v); break;
    case UnaryOp::Tanh: r = tanhf(v); break;
    case UnaryOp::Softplus: r = v > 20.0f ? v : log1pf(expf(v)); break;
    case UnaryOp::Neg: r = -v; break;
    case UnaryOp::Square: r = v * v; break;
    case UnaryOp::Sqrt: r = sqrtf(v); break;
  }
  y[i] = r;
}

__global__ void binary_kernel(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t bn) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float u = a[i], v = b[bn == n ? i : i % bn];
  switch (op) {
    case BinaryOp::Add: y[i] = u + v; break;
    case BinaryOp::Sub: y[i] = u - v; break;
    case BinaryOp::Mul: y[i] = u * v; break;
    case BinaryOp::Div: y[i] = u / v; break;
  }
}

__global__ void glu_kernel(GluOp op, const float* g, const float* u, float* y, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float a = op == GluOp::SwiGlu ? silu_d(g[i]) : op == GluOp::GeGluTanh ? gelu_tanh_d(g[i]) : gelu_d(g[i]);
  y[i] = a * u[i];
}

__global__ void scale_kernel(const float* x, float* y, int64_t n, float s, float cap) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  y[i] = cap > 0 ? tanhf(x[i] / cap) * cap : x[i] * s;
}

__global__ void add_bias_kernel(float* y, const float* b, int64_t n, int64_t m) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n * m) y[i] += b[i % m];
}

// PARITY.md greedy: argmax of (x - logsumexp) in float32, first index wins,
// non-finite logsumexp selects 0.
__global__ void argmax_kernel(const float* x, int32_t* out, int64_t v) {
  const float* r = x + blockIdx.x * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_max(m);
  float s = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(r[j] - m);
  s = block_sum(s);
  float lse = m + logf(s);
  float best = -INFINITY;
  int64_t bi = INT64_MAX;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    float lv = r[j] - lse;
    if (lv > best) {
      best = lv;
      bi = j;
    }
  }
  __shared__ float sb[1024];
  __shared__ int64_t si[1024];
  sb[threadIdx.x] = best;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      float ob = sb[threadIdx.x + w];
      int64_t oi = si[threadIdx.x + w];
      if (ob > sb[threadIdx.x] || (ob == sb[threadIdx.x] && oi < si[threadIdx.x])) {
        sb[threadIdx.x] = ob;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = (!isfinite(lse) || si[0] == INT64_MAX) ? 0 : static_cast<int32_t>(si[0]);
}

__global__ void gather_rows_kernel(const uint8_t* x, uint8_t* y, const int64_t* rows, int64_t row_bytes) {
  int64_t r = blockIdx.y;
  const uint8_t* s = x + rows[r] * row_bytes;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < row_bytes; i += int64_t(gridDim.x) * blockDim.x)
    y[r * row_bytes + i] = s[i];
}

// Each thread takes one column over rows [i0, i0 + per): repeated rows add in
// the given order; per == 1 when every row is distinct.
__global__ void scatter_add_rows_kernel(float* dst, const float* src, const int64_t* rows, const float* w, int64_t n,
                                        int64_t d, int64_t per) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= d) return;
  const int64_t i0 = blockIdx.y * per, i1 = min(n, i0 + per);
  for (int64_t i = i0; i < i1; ++i) {
    float* p = dst + rows[i] * d + j;
    *p = __fadd_rn(*p, __fmul_rn(w[i], src[i * d + j]));  // the CPU's rounding: no fused multiply-add
  }
}

struct StridedArgs {
  int64_t shape[kMaxDims];
  int64_t sstride[kMaxDims];
  int64_t dstride[kMaxDims];
  int nd;
  int es;
};

__global__ void strided_copy_kernel(const uint8_t* src, uint8_t* dst, int64_t n, StridedArgs a) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  int64_t rem = i, so = 0, doff = 0;
  for (int d = a.nd - 1; d >= 0; --d) {
    int64_t idx = rem % a.shape[d];
    rem /= a.shape[d];
    so += idx * a.sstride[d];
    doff += idx * a.dstride[d];
  }
  for (int b = 0; b < a.es; ++b) dst[doff * a.es + b] = src[so * a.es + b];
}

int norm_threads(int64_t d) { return d >= 1024 ? 1024 : d >= 256 ? 256 : 128; }

}  // namespace

void launch_cast(const void* src, DType st, void* dst, DType dt, int64_t n) {
  if (n == 0) return;
  cast_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(src, st, dst, dt, n);
  CUDA_LAUNCH_OK();
}

void launch_embedding(const void* table, DType tdt, int64_t stride, const int32_t* ids, int64_t n, int64_t d,
                      float* out) {
  if (n == 0) return;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((d + 255) / 256, 64)), static_cast<unsigned>(n));
  embedding_kernel<<<grid, 256, 0, stream()>>>(table, tdt, stride, ids, d, out);
  CUDA_LAUNCH_OK();
}

void launch_rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps, bool unit) {
  if (n == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(n), norm_threads(d), 0, stream()>>>(x, w, y, d, eps, unit);
  CUDA_LAUNCH_OK();
}

void launch_l2_norm(const float* x, float* y, int64_t n, int64_t d, float eps) {
  if (n == 0 || d == 0) return;
  l2_norm_kernel<<<static_cast<unsigned>(n), norm_threads(d), 0, stream()>>>(x, y, d, eps);
  CUDA_LAUNCH_OK();
}

void launch_scatter_add_rows(float* dst, const float* src, const int64_t* rows, const float* w, int64_t n, int64_t d,
                             bool unique_rows) {
  if (n == 0 || d == 0) return;
  constexpr int64_t kMaxGridY = 65535;
  const int64_t per = unique_rows ? (n + kMaxGridY - 1) / kMaxGridY : n;
  dim3 grid(blocks_for(d), static_cast<unsigned>((n + per - 1) / per));
  scatter_add_rows_kernel<<<grid, kThreads, 0, stream()>>>(dst, src, rows, w, n, d, per);
  CUDA_LAUNCH_OK();
}

void launch_layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t d, float eps) {
  if (n == 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(n), norm_threads(d), 0, stream()>>>(x, w, b, y, d, eps);
  CUDA_LAUNCH_OK();
}

void launch_rope(float* x, const int32_t* pos, int64_t t, int64_t h, int64_t d, const RopeSpec& spec) {
  launch_rope_pair(x, h, nullptr, 0, pos, t, d, spec);
}

void launch_rope_pair(float* x, int64_t h, float* x2, int64_t h2, const int32_t* pos, int64_t t, int64_t d,
                      const RopeSpec& spec) {
  if (t == 0) return;
  RopeArgs a{};
  a.half = spec.rotary_dim / 2;
  INGOT_CHECK(a.half <= 256, "rope: rotary dim too large for the CUDA kernel");
  INGOT_CHECK(spec.rotary_dim <= d && static_cast<int64_t>(spec.inv_freq.size()) == a.half, "rope: rotary dim ",
              spec.rotary_dim, " with ", spec.inv_freq.size(), " frequencies for head dim ", d);
  for (int i = 0; i < a.half; ++i) a.inv_freq[i] = spec.inv_freq[static_cast<size_t>(i)];
  a.scaling = spec.attention_scaling;
  a.interleaved = spec.interleaved;
  rope_kernel<<<dim3(static_cast<unsigned>(t), static_cast<unsigned>(h + h2)), std::min(128, std::max(32, a.half)),
                0, stream()>>>(x, h, x2, h2, pos, d, a);
  CUDA_LAUNCH_OK();
}

void launch_softmax(const float* x, float* y, int64_t n, int64_t d) {
  if (n == 0) return;
  softmax_kernel<<<static_cast<unsigned>(n), norm_threads(d), 0, stream()>>>(x, y, d);
  CUDA_LAUNCH_OK();
}

void launch_unary(UnaryOp op, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  unary_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(op, x, y, n);
  CUDA_LAUNCH_OK();
}

void launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t bn) {
  if (n == 0) return;
  binary_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(op, a, b, y, n, bn);
  CUDA_LAUNCH_OK();
}

void launch_glu(GluOp op, const float* g, const float* u, float* y, int64_t n) {
  if (n == 0) return;
  glu_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(op, g, u, y, n);
  CUDA_LAUNCH_OK();
}

void launch_scale(const float* x, float* y, int64_t n, float s, float cap) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n, s, cap);
  CUDA_LAUNCH_OK();
}

void launch_add_bias(float* y, const float* b, int64_t n, int64_t m) {
  if (n * m == 0) return;
  add_bias_kernel<<<blocks_for(n * m), kThreads, 0, stream()>>>(y, b, n, m);
  CUDA_LAUNCH_OK();
}

void launch_argmax(const float* x, int32_t* out, int64_t n, int64_t v) {
  if (n == 0) return;
  if (v < kArgmaxSplitMin) {
    argmax_kernel<<<static_cast<unsigned>(n), 1024, 0, stream()>>>(x, out, v);
  } else {
    // Large vocabularies: the row is spread over kArgmaxParts blocks in three short passes.
    Tensor ml = Tensor::empty({n * kArgmaxParts * 2}, DType::F32, Device::CUDA);
    Tensor best = Tensor::empty({n * kArgmaxParts}, DType::F32, Device::CUDA);
    Tensor idx = Tensor::empty({n * kArgmaxParts}, DType::I64, Device::CUDA);
    dim3 grid(kArgmaxParts, static_cast<unsigned>(n));
    argmax_lse_part_kernel<<<grid, 256, 0, stream()>>>(x, v, ml.data<float>());
    argmax_pick_part_kernel<<<grid, 256, 0, stream()>>>(x, v, ml.data<float>(), best.data<float>(),
                                                        idx.data<int64_t>());
    argmax_final_kernel<<<static_cast<unsigned>(n), kArgmaxParts, 0, stream()>>>(ml.data<float>(), best.data<float>(),
                                                                                 idx.data<int64_t>(), out);
  }
  CUDA_LAUNCH_OK();
}

void launch_gather_rows(const void* x, void* y, const int64_t* rows, int64_t nrows, int64_t row_bytes) {
  if (nrows == 0 || row_bytes == 0) return;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>((row_bytes + 255) / 256, 256)), static_cast<unsigned>(nrows));
  gather_rows_kernel<<<grid, 256, 0, stream()>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), rows,
                                                 row_bytes);
  CUDA_LAUNCH_OK();
}

void strided_copy(const Tensor& src, Tensor& dst) {
  StridedArgs a{};
  a.nd = src.ndim();
  a.es = static_cast<int>(dtype_size(src.dtype()));
  for (int d = 0; d < a.nd; ++d) {
    a.shape[d] = src.dim(d);
    a.sstride[d] = src.stride(d);
    a.dstride[d] = dst.stride(d);
  }
  int64_t n = src.numel();
  if (n == 0) return;
  strided_copy_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(static_cast<const uint8_t*>(src.raw()),
                                                                static_cast<uint8_t*>(dst.raw()), n, a);
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
