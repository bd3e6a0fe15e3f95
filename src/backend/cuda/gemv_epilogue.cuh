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

// Sums the partials of RPW consecutive rows row0.. (those below m) and
// writes y[r * m + row] for r < N: lane 0 for WPR = 1, threads of the block
// for WPR > 1. acc holds a row's sums per entry; for kSwiGlu, the RPW gate
// rows and then the RPW up rows. Every thread of the block must reach it
// when WPR > 1 (it synchronises the block).
template <int N, int WPR, int MODE, int RPW, int R>
__device__ inline void reduce_and_store_rows(float (&acc)[R][N], int lane, int warp, const float* __restrict__ res,
                                             float* __restrict__ y, int64_t m, int64_t row0) {
  static_assert(R == (MODE == kSwiGlu ? 2 * RPW : RPW), "gate and up rows for SwiGLU, else one per row");
  __shared__ float partial[WPR > 1 ? R * N * kWarpsPerBlock : 1];
#pragma unroll
  for (int i = 0; i < R; ++i) reduce_row<N, WPR>(acc[i], partial + (WPR > 1 ? i * N * kWarpsPerBlock : 0), lane, warp);
  auto finish = [&](int i, int r, float v, float v2) {
    (void)v2;
    const int64_t row = row0 + i;
    if (row >= m) return;
    const int64_t o = r * m + row;
    if constexpr (MODE == kResidual) v = res[o] + v;
    if constexpr (MODE == kSwiGlu) v = silu_f(v) * v2;
    y[o] = v;
  };
  if constexpr (WPR == 1) {
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < RPW; ++i)
#pragma unroll
        for (int r = 0; r < N; ++r) finish(i, r, acc[i][r], MODE == kSwiGlu ? acc[(RPW + i) % R][r] : 0.0f);
    }
  } else {
    __syncthreads();
    for (int t = threadIdx.x; t < RPW * N; t += blockDim.x) {
      const int i = t / N, r = t % N;
      auto sum = [&](int j) {
        float v = 0;
        for (int q = 0; q < WPR; ++q) v += partial[(j * N + r) * kWarpsPerBlock + q];
        return v;
      };
      finish(i, r, sum(i), MODE == kSwiGlu ? sum(RPW + i) : 0.0f);
    }
  }
}

// One row: acc (and acc2, the up row, for kSwiGlu).
template <int N, int WPR, int MODE>
__device__ inline void reduce_and_store(float (&acc)[N], float (&acc2)[N], int lane, int warp,
                                        const float* __restrict__ res, float* __restrict__ y, int64_t m, int64_t row) {
  constexpr int R = MODE == kSwiGlu ? 2 : 1;
  float rows[R][N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    rows[0][r] = acc[r];
    rows[R - 1][r] = MODE == kSwiGlu ? acc2[r] : acc[r];
  }
  reduce_and_store_rows<N, WPR, MODE, 1>(rows, lane, warp, res, y, m, row);
}

}  // namespace ingot::cuda::gemv
