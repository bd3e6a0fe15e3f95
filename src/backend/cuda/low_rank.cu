// Each block takes one (row, adapter) job and a slice of the outputs. It
// first shrinks its row, t = x · Aᵀ, into shared memory: every thread walks
// its share of k for 16 rank rows at once (16 independent multiply-add
// chains), then the block adds the threads' sums. It then adds t · Bᵀ[:, o]
// to each of its outputs o; Bᵀ is rank-major, so a warp's loads of one rank
// row are contiguous. Blocks of one row recompute the shrink (rank · k
// multiply-adds, small next to the expand's reads of Bᵀ) rather than meet in
// a second launch.
#include "backend/cuda/low_rank.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRankChunk = 16;  // rank rows per pass over k
constexpr int kMaxSlices = 16;  // output slices (blocks) per job

__device__ inline float value(float v) { return v; }
__device__ inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float value(__half v) { return __half2float(v); }

template <typename T>
__global__ void low_rank_add_kernel(LowRankJobs jobs, const float* __restrict__ x, float* __restrict__ y, int64_t k,
                                    int64_t m) {
  __shared__ float t[kLowRankMaxRank];
  __shared__ float part[kWarps][kRankChunk];
  const int job = blockIdx.x;
  const int64_t row = jobs.row[job];
  const LowRankAdapter g = jobs.adapter[jobs.adapter_of[job]];
  const float* xr = x + row * k;
  const T* a = static_cast<const T*>(g.a);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int j0 = 0; j0 < g.rank; j0 += kRankChunk) {
    const int nj = min(kRankChunk, g.rank - j0);
    float s[kRankChunk];
#pragma unroll
    for (int jj = 0; jj < kRankChunk; ++jj) s[jj] = 0.0f;
    for (int64_t i = threadIdx.x; i < k; i += kThreads) {
      const float xv = xr[i];
#pragma unroll
      for (int jj = 0; jj < kRankChunk; ++jj)
        if (jj < nj) s[jj] = fmaf(xv, value(a[static_cast<int64_t>(j0 + jj) * k + i]), s[jj]);
    }
#pragma unroll
    for (int jj = 0; jj < kRankChunk; ++jj) {
      float v = s[jj];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) part[warp][jj] = v;
    }
    __syncthreads();
    if (threadIdx.x < nj) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w) v += part[w][threadIdx.x];
      t[j0 + threadIdx.x] = v;
    }
    __syncthreads();
  }
  // Bᵀ rank-major: for each j the warp's threads read consecutive outputs.
  const T* bt = static_cast<const T*>(g.bt);
  float* yr = y + row * m;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; o < m; o += stride) {
    float s = 0.0f;
    for (int j = 0; j < g.rank; ++j) s = fmaf(t[j], value(bt[static_cast<int64_t>(j) * m + o]), s);
    yr[o] += s;
  }
}

}  // namespace

void launch_low_rank_add(const LowRankJobs& jobs, DType dtype, const float* x, float* y, int64_t k, int64_t m) {
  if (jobs.count == 0) return;
  const auto slices = static_cast<unsigned>(std::min<int64_t>((m + kThreads - 1) / kThreads, kMaxSlices));
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
