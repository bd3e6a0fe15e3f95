// Decode GEMV: y[n, m] = x[n, k] · W[m, k]ᵀ for bf16 W and few rows (n <= 8)
// on the CUDA cores; the launchers at the end hand row counts that Tuning
// gives the tensor cores to gemv_mma.cu.
// Memory-bound, so W is read exactly once, in 16-byte loads: one warp per
// output row, each lane taking 8 consecutive weights per step. x stays
// float32 in global memory (it is small and lives in L1/L2) and is rounded
// to bf16 on load, so the products equal cuBLAS's bf16 x bf16 path; sums are
// float32.
#include <cuda_bf16.h>

#include "backend/cuda/dispatch_rows.h"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/gemv_mma.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tuning.h"

namespace ingot::cuda {

namespace {

using gemv::kPlain;
using gemv::kResidual;
using gemv::kSwiGlu;
using gemv::kWarpsPerBlock;
constexpr int kUnroll = 4;  // 16-byte loads in flight per lane

__device__ inline float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// Adds the products of R weight rows with the N activation rows into acc:
// U chunks of each row in flight per thread, each x chunk read once for all
// R rows. A thread's chunks are summed in ascending order whatever R and U
// are, so the grouping never changes a result.
template <int N, int kStride, int R, int U>
__device__ inline void dot_rows(const uint4* const (&wr)[R], const float* __restrict__ x, int64_t k, int part,
                                float (&acc)[R][N]) {
  const int64_t chunks = k / 8;  // 8 bf16 per 16 bytes
  for (int64_t c0 = part; c0 < chunks; c0 += kStride * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + int64_t(u) * kStride;
#pragma unroll
      for (int i = 0; i < R; ++i) wv[u][i] = c < chunks ? __ldg(wr[i] + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + int64_t(u) * kStride;
      if (c >= chunks) break;
      float wf[R][8];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv[u][i]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(wp[j]);
          wf[i][2 * j] = f.x;
          wf[i][2 * j + 1] = f.y;
        }
      }
#pragma unroll
      for (int r = 0; r < N; ++r) {
        const float4* xp = reinterpret_cast<const float4*>(x + r * k + c * 8);
        const float4 a = __ldg(xp), b = __ldg(xp + 1);
        const float xv[8] = {round_bf16(a.x), round_bf16(a.y), round_bf16(a.z), round_bf16(a.w),
                             round_bf16(b.x), round_bf16(b.y), round_bf16(b.z), round_bf16(b.w)};
#pragma unroll
        for (int i = 0; i < R; ++i) {
          float s = acc[i][r];
#pragma unroll
          for (int e = 0; e < 8; ++e) s = fmaf(wf[i][e], xv[e], s);
          acc[i][r] = s;
        }
      }
    }
  }
}

// Weight rows one thread reads: RPW output rows (gate and up rows for
// SwiGLU), 16-byte loads in flight: 4 for one row, 8 for more.
template <int RPW, int MODE>
struct RowGroup {
  static constexpr int R = MODE == kSwiGlu ? 2 * RPW : RPW;
  static constexpr int U = (RPW == 1 ? kUnroll : 2 * kUnroll) / R > 0 ? (RPW == 1 ? kUnroll : 2 * kUnroll) / R : 1;
};

// WPR warps share RPW consecutive rows (WPR = 4 for matrices with few rows,
// so that the GPU still has enough loads in flight); the block holds
// 4 / WPR such groups. Rows past m read row m - 1 again and store nothing.
template <int N, int WPR, int RPW, int MODE>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_bf16_kernel(const __nv_bfloat16* __restrict__ w, const __nv_bfloat16* __restrict__ w2, int64_t ldw,
                     const float* __restrict__ x, const float* __restrict__ res, float* __restrict__ y, int64_t m,
                     int64_t k) {
  using G = RowGroup<RPW, MODE>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row0 = (int64_t(blockIdx.x) * (kWarpsPerBlock / WPR) + warp / WPR) * RPW;
  const int part = (warp % WPR) * 32 + lane;  // this thread's place among the row's threads
  constexpr int kStride = 32 * WPR;
  if (WPR == 1 && row0 >= m) return;  // (WPR > 1: every block starts below m, so the block stays together)
  // Overlapped with the kernel before (pdl.cuh): wait for its output (x, res).
  wait_for_previous_kernel();
  let_next_kernel_start();
  const uint4* wr[G::R];
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const int64_t row = row0 + i < m ? row0 + i : m - 1;
    wr[i] = reinterpret_cast<const uint4*>(w + row * ldw);
    if constexpr (MODE == kSwiGlu) wr[RPW + i] = reinterpret_cast<const uint4*>(w2 + row * ldw);
  }
  float acc[G::R][N];
#pragma unroll
  for (int i = 0; i < G::R; ++i)
#pragma unroll
    for (int r = 0; r < N; ++r) acc[i][r] = 0.0f;
  dot_rows<N, kStride, G::R, G::U>(wr, x, k, part, acc);
  gemv::reduce_and_store_rows<N, WPR, MODE, RPW>(acc, lane, warp, res, y, m, row0);
}

// Two rows per warp (or block) share each x load: x is read as float32, so
// its loads outnumber the weight's and one x chunk for two rows reads
// [2048 x 8192] at 2.8 vs 2.4 TB/s on the H200 (bench/RESULTS.md). Up to
// 4 activation rows (more would spill).
constexpr int rows_per_warp(int n) { return n <= 4 ? 2 : 1; }

// A block per row for long rows or few rows, a warp per row otherwise. On
// the H200 (bench/RESULTS.md) a block per row reads [4096 x 14336] at 3.6 vs
// 2.8 TB/s and [1024 x 4096] at 1.9 vs 1.4 TB/s, while [8192 x 2048] is
// faster with a warp per row (4.0 vs 3.2 TB/s).
bool block_per_row(int64_t m, int64_t k) { return m < 16384 && (k >= 4096 || m < 4096); }

template <int N, int RPW, int MODE>
void launch_rows(const __nv_bfloat16* w, const __nv_bfloat16* w2, int64_t ldw, const float* x, const float* res,
                 float* y, int64_t m, int64_t k) {
  if (block_per_row(m, k)) {
    launch_overlapped(gemv_bf16_kernel<N, kWarpsPerBlock, RPW, MODE>, dim3(static_cast<unsigned>((m + RPW - 1) / RPW)),
                      dim3(kWarpsPerBlock * 32), w, w2, ldw, x, res, y, m, k);
  } else {
    const int64_t rows_per_block = kWarpsPerBlock * RPW;
    unsigned grid = static_cast<unsigned>((m + rows_per_block - 1) / rows_per_block);
    launch_overlapped(gemv_bf16_kernel<N, 1, RPW, MODE>, dim3(grid), dim3(kWarpsPerBlock * 32), w, w2, ldw, x, res, y,
                      m, k);
  }
}

template <int MODE>
void launch_mode(const void* w_raw, const void* w2_raw, int64_t ldw, const float* x, const float* res, float* y,
                 int64_t n, int64_t m, int64_t k) {
  if (m == 0) return;
  const auto* w = static_cast<const __nv_bfloat16*>(w_raw);
  const auto* w2 = static_cast<const __nv_bfloat16*>(w2_raw);
  dispatch_rows(n, "gemv", [&](auto nc) {
    constexpr int N = decltype(nc)::value;
    launch_rows<N, rows_per_warp(N), MODE>(w, w2, ldw, x, res, y, m, k);
  });
  CUDA_LAUNCH_OK();
}

// Up to three weights sharing one input (q/k/v) in one launch: the row
// groups of the three matrices are numbered one after another (a group never
// spans two matrices) and each warp (or block) finds its matrix, then sums
// exactly as gemv_bf16_kernel's plain mode does for that matrix alone, so
// each output equals a separate launch bit for bit.
template <int N, int WPR, int RPW>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_bf16_multi_kernel(GemvSegments s, const float* __restrict__ x,
                                                                             int64_t k) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t group = int64_t(blockIdx.x) * (kWarpsPerBlock / WPR) + warp / WPR;
  const int part = (warp % WPR) * 32 + lane;
  constexpr int kStride = 32 * WPR;
  // Selects by comparisons rather than a dynamic index, which would copy s to local memory.
  const int64_t g0 = (s.m[0] + RPW - 1) / RPW, g01 = g0 + (s.m[1] + RPW - 1) / RPW;
  const int seg = group < g0 ? 0 : group < g01 ? 1 : 2;
  group -= seg == 0 ? 0 : seg == 1 ? g0 : g01;
  const int64_t m = seg == 0 ? s.m[0] : seg == 1 ? s.m[1] : s.m[2];
  const int64_t row0 = group * RPW;
  if (seg >= s.count || row0 >= m) return;  // (WPR > 1: the grid holds whole groups only, so the block leaves together)
  const auto* w = static_cast<const __nv_bfloat16*>(seg == 0 ? s.w[0] : seg == 1 ? s.w[1] : s.w[2]);
  const int64_t ldw = seg == 0 ? s.ldw[0] : seg == 1 ? s.ldw[1] : s.ldw[2];
  float* y = seg == 0 ? s.y[0] : seg == 1 ? s.y[1] : s.y[2];
  wait_for_previous_kernel();
  let_next_kernel_start();
  using G = RowGroup<RPW, kPlain>;
  const uint4* wr[RPW];
#pragma unroll
  for (int i = 0; i < RPW; ++i) wr[i] = reinterpret_cast<const uint4*>(w + (row0 + i < m ? row0 + i : m - 1) * ldw);
  float acc[RPW][N];
#pragma unroll
  for (int i = 0; i < RPW; ++i)
#pragma unroll
    for (int r = 0; r < N; ++r) acc[i][r] = 0.0f;
  dot_rows<N, kStride, RPW, G::U>(wr, x, k, part, acc);
  gemv::reduce_and_store_rows<N, WPR, kPlain, RPW>(acc, lane, warp, nullptr, y, m, row0);
}

template <int N, int RPW>
void launch_multi_rows(const GemvSegments& s, bool per_block, const float* x, int64_t k) {
  int64_t groups = 0;
  for (int i = 0; i < s.count; ++i) groups += (s.m[i] + RPW - 1) / RPW;
  if (per_block) {
    launch_overlapped(gemv_bf16_multi_kernel<N, kWarpsPerBlock, RPW>, dim3(static_cast<unsigned>(groups)),
                      dim3(kWarpsPerBlock * 32), s, x, k);
  } else {
    unsigned grid = static_cast<unsigned>((groups + kWarpsPerBlock - 1) / kWarpsPerBlock);
    launch_overlapped(gemv_bf16_multi_kernel<N, 1, RPW>, dim3(grid), dim3(kWarpsPerBlock * 32), s, x, k);
  }
}

// The tensor-core kernel for n rows (Tuning::mma_gemv_min_rows / max_rows).
bool takes_mma(int64_t n) {
  const Tuning& t = tuning();
  return n >= t.mma_gemv_min_rows && n <= t.mma_gemv_max_rows && n <= kGemvMmaMaxRows;
}

}  // namespace

bool gemv_bf16_applies(const void* w, int64_t ldw, const float* x, int64_t n, int64_t k) {
  if (k % 8 != 0 || ldw % 8 != 0 || !aligned16(w) || !aligned16(x)) return false;
  return n >= 1 && (takes_mma(n) || n <= kGemvMaxRows);
}

void launch_gemv_bf16(const void* w, int64_t ldw, const float* x, float* y, int64_t n, int64_t m, int64_t k) {
  if (takes_mma(n)) return launch_gemv_mma(one_matrix(w, ldw, y, m), x, n, k);
  launch_mode<kPlain>(w, nullptr, ldw, x, nullptr, y, n, m, k);
}

void launch_gemv_bf16_residual(const void* w, int64_t ldw, const float* x, const float* res, float* y, int64_t n,
                               int64_t m, int64_t k) {
  if (takes_mma(n)) return launch_gemv_mma_residual(w, ldw, x, res, y, n, m, k);
  launch_mode<kResidual>(w, nullptr, ldw, x, res, y, n, m, k);
}

void launch_gemv_bf16_swiglu(const void* gate, const void* up, int64_t ldw, const float* x, float* y, int64_t n,
                             int64_t m, int64_t k) {
  if (takes_mma(n)) return launch_gemv_mma_swiglu(gate, up, ldw, x, y, n, m, k);
  launch_mode<kSwiGlu>(gate, up, ldw, x, nullptr, y, n, m, k);
}

}  // namespace ingot::cuda

namespace ingot::cuda {

bool gemv_bf16_multi_applies(const GemvSegments& s, int64_t n, int64_t k) {
  if (s.count < 1 || s.count > 3) return false;
  for (int i = 0; i < s.count; ++i) {
    if (s.m[i] <= 0) return false;
    // (the tensor-core kernel takes any mix of shapes)
    if (!takes_mma(n) && block_per_row(s.m[i], k) != block_per_row(s.m[0], k)) return false;
  }
  return true;
}

void launch_gemv_bf16_multi(const GemvSegments& s, const float* x, int64_t n, int64_t k) {
  if (takes_mma(n)) return launch_gemv_mma(s, x, n, k);
  const bool per_block = block_per_row(s.m[0], k);
  dispatch_rows(n, "gemv", [&](auto nc) {
    constexpr int N = decltype(nc)::value;
    launch_multi_rows<N, rows_per_warp(N)>(s, per_block, x, k);
  });
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
