// Reference attention on the GPU: one block per (query, head), keys in tiles
// of the block size with an online softmax, so any context length fits.
#include <cuda_bf16.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

constexpr int kTile = 128;
constexpr int kMaxDvPerThread = 4;  // head dims up to 512

template <typename T>
__device__ inline float ld(const T* p, int64_t i);
template <>
__device__ inline float ld<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ inline float ld<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

__device__ float tile_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < kTile / 32; ++w) t = fmaxf(t, red[w]);
  __syncthreads();
  return t;
}

__device__ float tile_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0;
  for (int w = 0; w < kTile / 32; ++w) t += red[w];
  __syncthreads();
  return t;
}

template <typename T>
__global__ void attention_kernel(const float* q, const T* k, const T* v, float* out, int64_t h, int64_t d,
                                 int64_t s, int64_t kvh, int64_t dv, AttnParams p) {
  extern __shared__ float smem[];
  float* qs = smem;         // [d]
  float* ps = smem + d;     // [kTile]
  float* red = ps + kTile;  // [kTile / 32]
  const int64_t i = blockIdx.x / h, hh = blockIdx.x % h, kh = hh / (h / kvh);
  const int64_t qpos = p.q_offset + i;
  const int64_t hi = p.causal ? min(s - 1, qpos) : s - 1;
  const int64_t lo = p.window > 0 ? max(static_cast<int64_t>(0), qpos - p.window + 1) : 0;
  float* o = out + (i * h + hh) * dv;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) qs[c] = q[(i * h + hh) * d + c];
  __syncthreads();
  float acc[kMaxDvPerThread] = {0, 0, 0, 0};
  float m = -INFINITY, l = 0;
  for (int64_t t0 = lo; t0 <= hi; t0 += kTile) {
    int64_t j = t0 + threadIdx.x;
    float score = -INFINITY;
    if (j <= hi) {
      const T* kr = k + (j * kvh + kh) * d;
      float dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += qs[c] * ld(kr, c);
      dot *= p.scale;
      if (p.softcap > 0) dot = tanhf(dot / p.softcap) * p.softcap;
      score = dot;
    }
    float nm = fmaxf(m, tile_max(score, red));
    float pj = j <= hi ? expf(score - nm) : 0.0f;
    float corr = expf(m - nm);
    l = l * corr + tile_sum(pj, red);
    ps[threadIdx.x] = pj;
    __syncthreads();
    int64_t n = min(static_cast<int64_t>(kTile), hi - t0 + 1);
    for (int r = 0; r < kMaxDvPerThread; ++r) {
      int64_t c = threadIdx.x + r * kTile;
      if (c >= dv) break;
      float a = acc[r] * corr;
      for (int64_t jj = 0; jj < n; ++jj) a += ps[jj] * ld(v + ((t0 + jj) * kvh + kh) * dv, c);
      acc[r] = a;
    }
    m = nm;
    __syncthreads();
  }
  for (int r = 0; r < kMaxDvPerThread; ++r) {
    int64_t c = threadIdx.x + r * kTile;
    if (c >= dv) break;
    o[c] = l > 0 ? acc[r] / l : 0.0f;
  }
}

}  // namespace

void launch_attention(const float* q, const void* k, const void* v, DType kvdt, float* out, int64_t t, int64_t h,
                      int64_t d, int64_t s, int64_t kvh, int64_t dv, const AttnParams& p) {
  if (t == 0) return;
  INGOT_CHECK(dv <= kTile * kMaxDvPerThread, "attention: value head dim ", dv, " too large");
  size_t smem = static_cast<size_t>(d + kTile + kTile / 32) * sizeof(float);
  unsigned grid = static_cast<unsigned>(t * h);
  if (kvdt == DType::F32)
    attention_kernel<float><<<grid, kTile, smem, stream()>>>(q, static_cast<const float*>(k),
                                                             static_cast<const float*>(v), out, h, d, s, kvh, dv, p);
  else if (kvdt == DType::BF16)
    attention_kernel<__nv_bfloat16><<<grid, kTile, smem, stream()>>>(
        q, static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v), out, h, d, s, kvh, dv, p);
  else
    fail(ErrorKind::Unsupported, "CUDA attention over ", dtype_name(kvdt), " keys");
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
