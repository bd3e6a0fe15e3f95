// Kernels of the linear-attention (gated DeltaNet) layers: the depthwise
// causal conv over a saved input window, and the gated delta rule in its
// recurrent (decode) and chunked (prefill) forms. Float32 throughout. Each
// column of a head's state matrix belongs to one thread, which runs every
// sum in the order of the CPU reference (backend/cpu/extra_ops.cpp) with
// separately rounded multiplies and adds (no fused multiply-add), so the two
// backends differ only where expf does.
#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 64;     // tokens per chunk of the chunked form (as on the CPU)
constexpr int kColTile = 64;   // state columns per block of the chunked form
constexpr int kRecurrentThreads = 128;

inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// acc + a * b with the product rounded before the sum, like the CPU loops.
__device__ inline float madd(float acc, float a, float b) { return __fadd_rn(acc, __fmul_rn(a, b)); }

// Row r of the conv input preceded by the saved window: rows < K-1 are the state.
__device__ inline float conv_input(const float* x, const float* state, int64_t r, int64_t c, int64_t C, int64_t K) {
  return r < K - 1 ? state[r * C + c] : x[(r - (K - 1)) * C + c];
}

__global__ void causal_conv1d_kernel(const float* x, const float* w, const float* state, float* y, int64_t T,
                                     int64_t C, int64_t K) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= T * C) return;
  const int64_t t = i / C, c = i % C;
  float s = 0;
  for (int64_t j = 0; j < K; ++j) s = madd(s, w[c * K + j], conv_input(x, state, t + j, c, C, K));
  y[i] = s;
}

// The last K-1 inputs, into a fresh buffer: the old window may still be read.
__global__ void conv_window_kernel(const float* x, const float* state, float* out, int64_t T, int64_t C, int64_t K) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= (K - 1) * C) return;
  out[i] = conv_input(x, state, i / C + T, i % C, C, K);
}

struct DeltaArgs {
  const float *q, *k, *v, *g, *beta;  // q, k [T, hk, dk]; v [T, hv, dv]; g, beta [T, hv]
  float* out;                         // [T, hv, dv]
  float* state;                       // [hv, dk, dv]
  int64_t T, hk, hv, dk, dv;
};

__device__ inline const float* q_row(const DeltaArgs& a, int64_t t, int64_t kh) { return a.q + (t * a.hk + kh) * a.dk; }
__device__ inline const float* k_row(const DeltaArgs& a, int64_t t, int64_t kh) { return a.k + (t * a.hk + kh) * a.dk; }

// Token by token. Grid (hv, column tiles); thread owns column b of head h.
__global__ void delta_recurrent_kernel(DeltaArgs a) {
  const int64_t h = blockIdx.x, b = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  if (b >= a.dv) return;
  const int64_t kh = h / (a.hv / a.hk);
  float* S = a.state + h * a.dk * a.dv + b;  // S[i * dv] is row i of this column
  for (int64_t t = 0; t < a.T; ++t) {
    const float* q = q_row(a, t, kh);
    const float* k = k_row(a, t, kh);
    const float decay = expf(a.g[t * a.hv + h]), beta = a.beta[t * a.hv + h];
    float mem = 0;
    for (int64_t i = 0; i < a.dk; ++i) mem = madd(mem, __fmul_rn(S[i * a.dv], decay), k[i]);
    const float d = __fmul_rn(__fsub_rn(a.v[(t * a.hv + h) * a.dv + b], mem), beta);
    float o = 0;
    for (int64_t i = 0; i < a.dk; ++i) {
      const float s = madd(__fmul_rn(S[i * a.dv], decay), k[i], d);
      S[i * a.dv] = s;
      o = madd(o, s, q[i]);
    }
    a.out[(t * a.hv + h) * a.dv + b] = o;
  }
}

// Chunk-parallel form (the CPU's delta_chunked; the derivation is there).
// pair[i][j] = (k_i.k_j) e^{c_i-c_j} for j < i, or with `query` (q_i.k_j) e^{c_i-c_j}
// for j <= i, over the chunk's L rows from t0; the block's threads share the pairs.
__device__ inline void decayed_dots(const DeltaArgs& a, bool query, int64_t t0, int64_t kh, int L, const float* c,
                                    float* pair) {
  for (int p = threadIdx.x; p < L * L; p += blockDim.x) {
    const int i = p / L, j = p % L;
    if (query ? j > i : j >= i) continue;
    const float *ai = query ? q_row(a, t0 + i, kh) : k_row(a, t0 + i, kh), *kj = k_row(a, t0 + j, kh);
    float dot = 0;
    for (int64_t x = 0; x < a.dk; ++x) dot = madd(dot, ai[x], kj[x]);
    pair[i * kChunk + j] = __fmul_rn(dot, expf(__fsub_rn(c[i], c[j])));
  }
}

// Grid (hv, column tiles of kColTile), kColTile threads. The per-chunk
// scalars (cumulative decay, decayed k.k and q.k products) are shared by the
// block; the forward substitution, outputs and state update run per column.
__global__ void delta_chunked_kernel(DeltaArgs a) {
  __shared__ float c[kChunk];                // cumulative log decay
  __shared__ float tail[kChunk];             // e^{c_L - c_j}
  __shared__ float pair[kChunk * kChunk];    // (k_i.k_j) e^{c_i-c_j}, then (q_i.k_j) e^{c_i-c_j}
  __shared__ float dcol[kChunk * kColTile];  // corrections d_i, one column per thread
  const int64_t h = blockIdx.x, b = blockIdx.y * int64_t(kColTile) + threadIdx.x;
  const int tid = threadIdx.x;
  const bool owns = b < a.dv;
  const int64_t kh = h / (a.hv / a.hk);
  float* S = a.state + h * a.dk * a.dv + b;
  for (int64_t t0 = 0; t0 < a.T; t0 += kChunk) {
    const int L = static_cast<int>(min(int64_t(kChunk), a.T - t0));
    if (tid == 0) {
      float acc = 0;
      for (int i = 0; i < L; ++i) c[i] = (acc = __fadd_rn(acc, a.g[(t0 + i) * a.hv + h]));
      for (int j = 0; j < L; ++j) tail[j] = expf(__fsub_rn(c[L - 1], c[j]));
    }
    __syncthreads();
    decayed_dots(a, false, t0, kh, L, c, pair);
    __syncthreads();
    if (owns) {
      for (int i = 0; i < L; ++i) {
        const float* ki = k_row(a, t0 + i, kh);
        float s0k = 0;
        for (int64_t x = 0; x < a.dk; ++x) s0k = madd(s0k, S[x * a.dv], ki[x]);
        float di = __fsub_rn(a.v[((t0 + i) * a.hv + h) * a.dv + b], __fmul_rn(expf(c[i]), s0k));
        for (int j = 0; j < i; ++j) di = __fsub_rn(di, __fmul_rn(pair[i * kChunk + j], dcol[j * kColTile + tid]));
        dcol[i * kColTile + tid] = __fmul_rn(di, a.beta[(t0 + i) * a.hv + h]);
      }
    }
    __syncthreads();
    decayed_dots(a, true, t0, kh, L, c, pair);
    __syncthreads();
    if (owns) {
      for (int i = 0; i < L; ++i) {
        const float* qi = q_row(a, t0 + i, kh);
        float o = 0;
        for (int64_t x = 0; x < a.dk; ++x) o = madd(o, S[x * a.dv], qi[x]);
        o = __fmul_rn(o, expf(c[i]));
        for (int j = 0; j <= i; ++j) o = madd(o, pair[i * kChunk + j], dcol[j * kColTile + tid]);
        a.out[((t0 + i) * a.hv + h) * a.dv + b] = o;
      }
      const float el = expf(c[L - 1]);
      for (int64_t x = 0; x < a.dk; ++x) {
        float s = __fmul_rn(S[x * a.dv], el);
        for (int j = 0; j < L; ++j) s = madd(s, __fmul_rn(k_row(a, t0 + j, kh)[x], tail[j]), dcol[j * kColTile + tid]);
        S[x * a.dv] = s;
      }
    }
    __syncthreads();  // the next chunk overwrites c, tail and pair
  }
}

}  // namespace

void launch_causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T, int64_t C, int64_t K) {
  if (T == 0 || C == 0) return;
  causal_conv1d_kernel<<<blocks_for(T * C), kThreads, 0, stream()>>>(x, w, state, y, T, C, K);
  CUDA_LAUNCH_OK();
  if (K <= 1) return;
  Tensor window = Tensor::empty({K - 1, C}, DType::F32, Device::CUDA);
  conv_window_kernel<<<blocks_for((K - 1) * C), kThreads, 0, stream()>>>(x, state, window.data<float>(), T, C, K);
  CUDA_LAUNCH_OK();
  CUDA_OK(cudaMemcpyAsync(state, window.data<float>(), static_cast<size_t>((K - 1) * C) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream()));
}

void launch_gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                             float* state, float* out, int64_t T, int64_t hk, int64_t hv, int64_t dk, int64_t dv,
                             bool chunked) {
  if (T == 0 || hv == 0 || dv == 0) return;
  DeltaArgs a{q, k, v, g, beta, out, state, T, hk, hv, dk, dv};
  if (chunked) {
    dim3 grid(static_cast<unsigned>(hv), static_cast<unsigned>((dv + kColTile - 1) / kColTile));
    delta_chunked_kernel<<<grid, kColTile, 0, stream()>>>(a);
  } else {
    const int threads = static_cast<int>(std::min<int64_t>(kRecurrentThreads, (dv + 31) / 32 * 32));
    dim3 grid(static_cast<unsigned>(hv), static_cast<unsigned>((dv + threads - 1) / threads));
    delta_recurrent_kernel<<<grid, threads, 0, stream()>>>(a);
  }
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
