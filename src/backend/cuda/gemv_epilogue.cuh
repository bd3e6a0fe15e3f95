// The part the decode GEMVs (gemv.cu for bf16, quant_gemv.cu's staged kernel)
// share: each thread of a row holds partial dot products for N activation
// rows; these are summed over the row's threads (one warp, or WPR warps of a
// 4-warp block) and finished by the launch's epilogue. Every form sums in the
// same order, so the fused epilogues equal the separate ops bit for bit.
#pragma once
#include <cstdint>

namespace ingot::cuda::gemv {

constexpr int kWarpsPerBlock = 4;

// y = W·x; y = res + W·x; y = silu(Wg·x) * (Wu·x) (acc: gate, acc2: up); or
// up to three weights on one x (q/k/v), each finished as kPlain.
enum Mode { kPlain = 0, kResidual = 1, kSwiGlu = 2, kMulti = 3 };

__device__ inline float silu_f(float x) { return x / (1.0f + expf(-x)); }

// Warp sums of acc; with WPR > 1 lane 0 of each warp leaves its sum in partial.
template <int N, int WPR>
__device__ inline void reduce_row(float (&acc)[N], float* partial, int lane, int warp) {
#pragma unroll
  for (int r = 0; r < N; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    acc[r] = v;
    if (WPR > 1 && lane == 0) partial[r * kWarpsPerBlock + warp] = v;
  }
}

// Sums the row's partials and writes y[r * m + row] for r < N (lane 0 for
// WPR = 1, thread r of the block for WPR > 1). Every thread of the block must
// reach it when WPR > 1 (it synchronises the block).
template <int N, int WPR, int MODE>
__device__ inline void reduce_and_store(float (&acc)[N], float (&acc2)[N], int lane, int warp,
                                        const float* __restrict__ res, float* __restrict__ y, int64_t m, int64_t row) {
  __shared__ float partial[WPR > 1 ? N * kWarpsPerBlock : 1];
  __shared__ float partial2[WPR > 1 && MODE == kSwiGlu ? N * kWarpsPerBlock : 1];
  reduce_row<N, WPR>(acc, partial, lane, warp);
  if constexpr (MODE == kSwiGlu) reduce_row<N, WPR>(acc2, partial2, lane, warp);
  (void)partial2;
  auto finish = [&](int r, float v, float v2) {
    (void)v2;
    const int64_t o = r * m + row;
    if constexpr (MODE == kResidual) v = res[o] + v;
    if constexpr (MODE == kSwiGlu) v = silu_f(v) * v2;
    y[o] = v;
  };
  if constexpr (WPR == 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < N; ++r) finish(r, acc[r], acc2[r]);
    }
  } else {
    __syncthreads();
    if (threadIdx.x < N) {
      float v = 0, v2 = 0;
      for (int q = 0; q < WPR; ++q) v += partial[threadIdx.x * kWarpsPerBlock + q];
      if constexpr (MODE == kSwiGlu)
        for (int q = 0; q < WPR; ++q) v2 += partial2[threadIdx.x * kWarpsPerBlock + q];
      finish(threadIdx.x, v, v2);
    }
  }
}

}  // namespace ingot::cuda::gemv
