// Each block takes one (row, adapter) job and a slice of the outputs. It
// first shrinks its row, t = x · Aᵀ, into shared memory: thread i takes the
// 8-column pieces i, i + 256, ... of x (read once) and 16 rank rows of A at a
// time, 16 independent 16-byte loads in flight, then the block adds the
// threads' sums. It then adds t · Bᵀ[:, o..o + 7] to 8 consecutive outputs
// per thread, again 16 rank rows of Bᵀ (rank-major, so the loads of a warp
// are contiguous) in flight at once. Blocks of one row recompute the shrink
// (rank · k multiply-adds, small next to the expand's reads of Bᵀ) rather
// than meet in a second launch. The first form walked k and the rank one
// element at a time and waited on every load (~20 µs a launch on the H100).
#include "backend/cuda/low_rank.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRankChunk = 16;  // rank rows in flight per pass
constexpr int kMaxSlices = 16;  // output slices (blocks) per job

// 8 consecutive values as float32 (16-byte loads; 32 bytes for float32).
__device__ inline void load8(const float* p, float (&f)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ inline void load8(const __nv_bfloat16* p, float (&f)[8]) {
  const uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}
__device__ inline void load8(const __half* p, float (&f)[8]) {
  const uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
  const auto* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    low_rank_add_kernel(LowRankJobs jobs, const float* __restrict__ x, float* __restrict__ y, int64_t k, int64_t m) {
  __shared__ float t[kLowRankMaxRank];
  __shared__ float part[kWarps][kRankChunk];
  const int job = blockIdx.x;
  const int64_t row = jobs.row[job];
  const LowRankAdapter g = jobs.adapter[jobs.adapter_of[job]];
  const float* xr = x + row * k;
  const T* a = static_cast<const T*>(g.a);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t pieces = k / 8;
  for (int j0 = 0; j0 < g.rank; j0 += kRankChunk) {
    float s[kRankChunk];
#pragma unroll
    for (int jj = 0; jj < kRankChunk; ++jj) s[jj] = 0.0f;
    for (int64_t c = threadIdx.x; c < pieces; c += kThreads) {
      float xv[8];
      load8(xr + c * 8, xv);
#pragma unroll
      for (int jj = 0; jj < kRankChunk; ++jj) {
        if (j0 + jj >= g.rank) break;
        float w[8];
        load8(a + static_cast<int64_t>(j0 + jj) * k + c * 8, w);
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d = fmaf(xv[e], w[e], d);
        s[jj] += d;
      }
    }
#pragma unroll
    for (int jj = 0; jj < kRankChunk; ++jj) {
      float v = s[jj];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) part[warp][jj] = v;
    }
    __syncthreads();
    if (threadIdx.x < kRankChunk && j0 + static_cast<int>(threadIdx.x) < g.rank) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w) v += part[w][threadIdx.x];
      t[j0 + threadIdx.x] = v;
    }
    __syncthreads();
  }
  const T* bt = static_cast<const T*>(g.bt);
  float* yr = y + row * m;
  const int64_t outs8 = m / 8, stride = static_cast<int64_t>(gridDim.y) * kThreads;
  for (int64_t o8 = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x; o8 < outs8; o8 += stride) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j0 = 0; j0 < g.rank; j0 += kRankChunk) {
#pragma unroll
      for (int jj = 0; jj < kRankChunk; ++jj) {
        if (j0 + jj >= g.rank) break;
        float b[8];
        load8(bt + static_cast<int64_t>(j0 + jj) * m + o8 * 8, b);
        const float tj = t[j0 + jj];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(tj, b[e], acc[e]);
      }
    }
    float4* yo = reinterpret_cast<float4*>(yr + o8 * 8);
    float4 lo = yo[0], hi = yo[1];
    lo.x += acc[0], lo.y += acc[1], lo.z += acc[2], lo.w += acc[3];
    hi.x += acc[4], hi.y += acc[5], hi.z += acc[6], hi.w += acc[7];
    yo[0] = lo;
    yo[1] = hi;
  }
}

}  // namespace

void launch_low_rank_add(const LowRankJobs& jobs, DType dtype, const float* x, float* y, int64_t k, int64_t m) {
  if (jobs.count == 0) return;
  const auto slices = static_cast<unsigned>(std::min<int64_t>((m / 8 + kThreads - 1) / kThreads, kMaxSlices));
  const dim3 grid(static_cast<unsigned>(jobs.count), slices);
  switch (dtype) {
    case DType::F32:
      low_rank_add_kernel<float><<<grid, kThreads, 0, stream()>>>(jobs, x, y, k, m);
      break;
    case DType::BF16:
      low_rank_add_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream()>>>(jobs, x, y, k, m);
      break;
    case DType::F16:
      low_rank_add_kernel<__half><<<grid, kThreads, 0, stream()>>>(jobs, x, y, k, m);
      break;
    default:
      fail(ErrorKind::Internal, "low_rank_add: adapter dtype ", dtype_name(dtype));
  }
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
