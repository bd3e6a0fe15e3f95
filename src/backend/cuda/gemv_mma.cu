// Decode products on the tensor cores: y[n, m] = x[n, k] · W[m, k]ᵀ for bf16 W
// and up to 64 activation rows, in gemv.cu's forms (plain, residual, SwiGLU,
// up to three weights on one x). The CUDA-core GEMV pays for every activation
// row with its own float32 loads and multiply-adds per weight, so 8 rows took
// 2.3x as long as one (bench/RESULTS.md); here one mma.sync takes 16 weight
// rows times 8 activation rows, and a step of 8 rows reads about what one
// does.
//
// A block of 4 warps owns 16 output rows (16 gate and 16 up rows for SwiGLU)
// and the warps take its 32-column chunks in turn. In a chunk each lane reads
// 16 bytes (8 consecutive weights) of row g and of row g + 8 (g = lane / 4)
// and the same 8 columns of activation row g of each 8-row tile: the k order
// inside an mma is free as long as A and B agree, so the lane's 8 columns
// feed two m16n8k16 products (its columns 0-3 are the fragment's k = 2t,
// 2t + 1, 2t + 8, 2t + 9 of the first, 4-7 of the second; t = lane % 4)
// without any shuffle, and every load is a whole 16- or 32-byte piece.
// x is rounded to bf16 as the CUDA-core GEMV and cuBLAS's bf16 path do; sums
// are float32.
//
// Each output is a sum over the chunks in one fixed order (a warp's chunks
// ascending, then the 4 warps' partials in warp order), whatever the number
// of rows, the form or the matrix beside it in a q/k/v launch: an activation
// row's result does not depend on the rows that share its launch.
#include <cuda_bf16.h>

#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/gemv_mma.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/runtime.h"

namespace ingot::cuda {

namespace {

using gemv::kPlain;
using gemv::kResidual;
using gemv::kSwiGlu;
constexpr int kWarps = 4;         // warps per block, sharing its rows' chunks
constexpr int kTileRows = 16;     // output rows per block (per matrix)
constexpr int kChunkCols = 32;    // columns a warp takes per step: two k16 products
constexpr int kPieceCols = 8;     // columns a lane loads at once (16 bytes of bf16)

// Chunks a warp loads before it multiplies: more for fewer activation tiles,
// so that about the same bytes are in flight whatever the row count.
constexpr int chunks_in_flight(int tiles, int mode) {
  const int u = tiles == 1 ? 8 : tiles <= 2 ? 4 : 2;
  return mode == kSwiGlu && u > 1 ? u / 2 : u;
}

struct RowPair {
  const uint4* a;  // row g
  const uint4* b;  // row g + 8
};

// The 8 columns `piece` (16-byte units) of activation row r as four bf16 pairs; zeros past n.
__device__ __forceinline__ void load_x(const float* __restrict__ x, int64_t k, int r, int n, int64_t piece,
                                       bool valid, uint32_t (&xb)[4]) {
  if (r < n && valid) {
    const float4* xp = reinterpret_cast<const float4*>(x + int64_t(r) * k + piece * kPieceCols);
    const float4 lo = __ldg(xp), hi = __ldg(xp + 1);
    xb[0] = pack_bf16(lo.x, lo.y);
    xb[1] = pack_bf16(lo.z, lo.w);
    xb[2] = pack_bf16(hi.x, hi.y);
    xb[3] = pack_bf16(hi.z, hi.w);
  } else {
    xb[0] = xb[1] = xb[2] = xb[3] = 0u;
  }
}

// acc += W[16 rows, these 8 columns per lane] · x-tile: the lane's columns
// 0-3 go to the first product, 4-7 to the second.
__device__ __forceinline__ void mma_piece(float (&acc)[4], const uint4& wa, const uint4& wb, const uint32_t (&xb)[4]) {
  const uint32_t a0[4] = {wa.x, wb.x, wa.y, wb.y};
  const uint32_t a1[4] = {wa.z, wb.z, wa.w, wb.w};
  mma_bf16(acc, a0, xb[0], xb[1]);
  mma_bf16(acc, a1, xb[2], xb[3]);
}

// One block: 16 rows of one matrix of s (gate rows of s.w[0] and up rows of
// `up` for SwiGLU), every activation row of the launch.
template <int TILES, int MODE>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_mma_kernel(GemvSegments s, const __nv_bfloat16* __restrict__ up, const float* __restrict__ x,
                    const float* __restrict__ res, int n, int64_t k) {
  constexpr int R = MODE == kSwiGlu ? 2 : 1;  // matrices a block reads: gate and up, or one
  constexpr int U = chunks_in_flight(TILES, MODE);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;

  // Which matrix and which 16 of its rows (selected by comparisons: a dynamic index would copy s to local memory).
  int64_t tile = blockIdx.x;
  const int64_t t0 = (s.m[0] + kTileRows - 1) / kTileRows;
  const int64_t t01 = t0 + (s.count > 1 ? (s.m[1] + kTileRows - 1) / kTileRows : 0);
  const int seg = tile < t0 ? 0 : tile < t01 ? 1 : 2;
  tile -= seg == 0 ? 0 : seg == 1 ? t0 : t01;
  const int64_t m = seg == 0 ? s.m[0] : seg == 1 ? s.m[1] : s.m[2];
  const auto* w = static_cast<const __nv_bfloat16*>(seg == 0 ? s.w[0] : seg == 1 ? s.w[1] : s.w[2]);
  const int64_t ldw = seg == 0 ? s.ldw[0] : seg == 1 ? s.ldw[1] : s.ldw[2];
  float* y = seg == 0 ? s.y[0] : seg == 1 ? s.y[1] : s.y[2];
  const int64_t row0 = tile * kTileRows;
  // Rows past m read row m - 1 again and store nothing.
  const int64_t ra = min(row0 + g, m - 1), rb = min(row0 + g + 8, m - 1);
  RowPair rows[R];
  rows[0] = {reinterpret_cast<const uint4*>(w + ra * ldw), reinterpret_cast<const uint4*>(w + rb * ldw)};
  if constexpr (MODE == kSwiGlu)
    rows[R - 1] = {reinterpret_cast<const uint4*>(up + ra * ldw), reinterpret_cast<const uint4*>(up + rb * ldw)};

  // Overlapped with the kernel before (pdl.cuh): wait for its output (x, res).
  wait_for_previous_kernel();
  let_next_kernel_start();

  float acc[R][TILES][4];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < TILES; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

  const int64_t pieces = k / kPieceCols;
  const int64_t chunks = (k + kChunkCols - 1) / kChunkCols;
  for (int64_t c0 = warp; c0 < chunks; c0 += int64_t(kWarps) * U) {
    uint4 wa[U][R], wb[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t piece = (c0 + int64_t(u) * kWarps) * (kChunkCols / kPieceCols) + t;
      const bool valid = c0 + int64_t(u) * kWarps < chunks && piece < pieces;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        wa[u][i] = valid ? __ldg(rows[i].a + piece) : make_uint4(0, 0, 0, 0);
        wb[u][i] = valid ? __ldg(rows[i].b + piece) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + int64_t(u) * kWarps;
      if (c >= chunks) break;  // the same for the whole warp
      const int64_t piece = c * (kChunkCols / kPieceCols) + t;
      const bool valid = piece < pieces;
#pragma unroll
      for (int j = 0; j < TILES; ++j) {
        uint32_t xb[4];
        load_x(x, k, j * 8 + g, n, piece, valid, xb);
#pragma unroll
        for (int i = 0; i < R; ++i) mma_piece(acc[i][j], wa[u][i], wb[u][i], xb);
      }
    }
  }

  // The warps' partials, summed in warp order by warp 0.
  __shared__ float partial[kWarps - 1][R * TILES * 4][32];
  if (warp > 0) {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < TILES; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) partial[warp - 1][(i * TILES + j) * 4 + e][lane] = acc[i][j][e];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v[R];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        v[i] = acc[i][j][e];
#pragma unroll
        for (int q = 0; q < kWarps - 1; ++q) v[i] += partial[q][(i * TILES + j) * 4 + e][lane];
      }
      // Fragment entry e: output row g (+ 8 for e >= 2), activation row 2t (+ 1 for odd e) of tile j.
      const int64_t row = row0 + g + (e >= 2 ? 8 : 0);
      const int r = j * 8 + 2 * t + (e & 1);
      if (row >= m || r >= n) continue;
      const int64_t o = int64_t(r) * m + row;
      float out = v[0];
      if constexpr (MODE == kResidual) out = res[o] + out;
      if constexpr (MODE == kSwiGlu) out = gemv::silu_f(out) * v[R - 1];
      y[o] = out;
    }
  }
}

template <int MODE>
void launch_tiles(const GemvSegments& s, const void* up, const float* x, const float* res, int64_t n, int64_t k) {
  int64_t blocks = 0;
  for (int i = 0; i < s.count; ++i) blocks += (s.m[i] + kTileRows - 1) / kTileRows;
  if (blocks == 0) return;
  const auto* u = static_cast<const __nv_bfloat16*>(up);
  const int rows = static_cast<int>(n);
  auto go = [&](auto kernel) {
    launch_overlapped(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), s, u, x, res, rows, k);
  };
  switch ((n + 7) / 8) {
    case 1: go(gemv_mma_kernel<1, MODE>); break;
    case 2: go(gemv_mma_kernel<2, MODE>); break;
    case 3: go(gemv_mma_kernel<3, MODE>); break;
    case 4: go(gemv_mma_kernel<4, MODE>); break;
    case 5: go(gemv_mma_kernel<5, MODE>); break;
    case 6: go(gemv_mma_kernel<6, MODE>); break;
    case 7: go(gemv_mma_kernel<7, MODE>); break;
    case 8: go(gemv_mma_kernel<8, MODE>); break;
    default: fail(ErrorKind::Internal, "gemv_mma: ", n, " rows");
  }
  CUDA_LAUNCH_OK();
}

}  // namespace

void launch_gemv_mma(const GemvSegments& s, const float* x, int64_t n, int64_t k) {
  launch_tiles<kPlain>(s, nullptr, x, nullptr, n, k);
}

void launch_gemv_mma_residual(const void* w, int64_t ldw, const float* x, const float* res, float* y, int64_t n,
                              int64_t m, int64_t k) {
  launch_tiles<kResidual>(one_matrix(w, ldw, y, m), nullptr, x, res, n, k);
}

void launch_gemv_mma_swiglu(const void* gate, const void* up, int64_t ldw, const float* x, float* y, int64_t n,
                            int64_t m, int64_t k) {
  launch_tiles<kSwiGlu>(one_matrix(gate, ldw, y, m), up, x, nullptr, n, k);
}

}  // namespace ingot::cuda
