// Decode GEMV over Q8_0 / Q4_0 / Q4_1 weights with the activations rounded to
// int8, the default for these formats at or above Tuning::qgemv_int8_min_values
// weight values a launch (smaller launches keep float32 x: quant_gemv.cu).
//
// Why: with float32 x a lane reads 32 bytes of x for every 4.5 bytes of Q4_0
// weight, so the float kernel is bound by L1 traffic and per-value decode at
// 0.9-1.6 TB/s of weight. Here each block of the grid first rounds x into
// shared memory exactly as the CPU backend does (quant/xquant.h: per 32
// values d = max|x| / 127, q = x / d rounded to nearest-even, d and d * sum(q)
// through f16), so x costs 1.1 bytes a value from shared memory and the dot of
// 8 values is two dp4a. Each block-of-32 partial is the exact integer dot
// times f16(w) * d16, as on the CPU; results differ from the CPU backend by
// float32 summation order only.
//
// Layout: 4 lanes a 32-value weight block (lane quarter q: qs bytes 4q..4q+3 =
// values 4q.. and 16+4q.. for Q4, bytes 8q..8q+7 for Q8_0), 8 consecutive
// blocks a warp step; the x bytes a quarter needs lie side by side (the
// quantizer stores Q4's low- and high-nibble partners together), one 8-byte
// shared load. A warp owns one output row at a time (gate and up together for
// SwiGLU) and the grid strides over rows, so the x rounding is paid once per
// block of the grid, not per row. Each row's sum depends on no other row, so
// the fused forms equal the plain ones bit for bit and rows are batch-invariant.
#include <cuda_fp16.h>

#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda/dispatch_rows.h"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_gemv_internal.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tuning.h"
#include "util/error.h"

namespace ingot::cuda {

namespace {

constexpr int kWarps = 8;  // warps per block of the grid

__device__ inline float f16_lo(uint32_t w) { return __half2float(__ushort_as_half(static_cast<unsigned short>(w))); }

// One lane's share of a weight block: s = the f16 scale (and Q4_1's min in the
// high half), a / b = its 8 quants.
struct Raw {
  uint32_t s, a, b;
};

template <QuantFormat F>
struct Int8Dot;

template <bool kMin>
struct Q4Dot {
  static constexpr int kBytes = kMin ? 20 : 18;
  static constexpr bool kPaired = true;  // x stored as low/high-nibble partners
  __device__ static Raw load(const uint8_t* blk, int q) {
    return Raw{kMin ? ld32_2(blk) : ld16(blk), ld32_2(blk + (kMin ? 4 : 2) + 4 * q), 0};
  }
  __device__ static int dot(const Raw& r, int2 x) {
    uint32_t lo = r.a & 0x0F0F0F0Fu, hi = (r.a >> 4) & 0x0F0F0F0Fu;
    if (!kMin) {  // Q4_0 stores q + 8: bytes of q - 8 (-8..7) as signed int8
      lo = __vsub4(lo, 0x08080808u);
      hi = __vsub4(hi, 0x08080808u);
    }
    return __dp4a(static_cast<int>(hi), x.y, __dp4a(static_cast<int>(lo), x.x, 0));
  }
};
template <>
struct Int8Dot<QuantFormat::Q4_0> : Q4Dot<false> {};
template <>
struct Int8Dot<QuantFormat::Q4_1> : Q4Dot<true> {};

template <>
struct Int8Dot<QuantFormat::Q8_0> {
  static constexpr int kBytes = 34;
  static constexpr bool kPaired = false;
  __device__ static Raw load(const uint8_t* blk, int q) {
    return Raw{ld16(blk), ld32_2(blk + 2 + 8 * q), ld32_2(blk + 6 + 8 * q)};
  }
  __device__ static int dot(const Raw& r, int2 x) {
    return __dp4a(static_cast<int>(r.b), x.y, __dp4a(static_cast<int>(r.a), x.x, 0));
  }
};

// Shared memory of a launch: int8 x [n][k], then d16 [n][k/32], then (Q4_1)
// s16 [n][k/32].
struct XShared {
  const int2* q;  // a lane quarter's 8 bytes
  const float* d16;
  const float* s16;
};

size_t shared_bytes(QuantFormat f, int64_t n, int64_t k) {
  const int64_t nb = k / 32;
  return static_cast<size_t>(n * k + n * nb * 4 * (f == QuantFormat::Q4_1 ? 2 : 1));
}

// Rounds the nb32 blocks of 32 values of x (all n rows, one after another)
// into shared memory: 8 threads a block, 4 values each, P blocks per thread
// loaded before any is used. The same operations as quantize_block_scalar
// (quant/xquant.cpp), so the int8 values, d16 and s16 equal the CPU's.
template <bool kPaired, bool kSums>
__device__ void round_x(const float* __restrict__ x, int64_t nb32, uint8_t* smem) {
  constexpr int P = 4;
  uint32_t* xq = reinterpret_cast<uint32_t*>(smem);
  float* d16 = reinterpret_cast<float*>(smem + nb32 * 32);
  float* s16 = d16 + nb32;
  const int l8 = threadIdx.x & 7;
  const int64_t per_pass = blockDim.x / 8;
  const int word = kPaired ? (l8 < 4 ? 2 * l8 : 2 * (l8 - 4) + 1) : l8;
  for (int64_t g0 = threadIdx.x / 8; g0 - threadIdx.x / 8 < nb32; g0 += P * per_pass) {
    float4 v[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t g = g0 + p * per_pass;
      v[p] = g < nb32 ? __ldg(reinterpret_cast<const float4*>(x + g * 32 + 4 * l8)) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int64_t g = g0 + p * per_pass;
      float amax = fmaxf(fmaxf(fabsf(v[p].x), fabsf(v[p].y)), fmaxf(fabsf(v[p].z), fabsf(v[p].w)));
      // All 32 lanes take part (rows past the end hold zeros); xor 1/2/4 stays in the 8-lane group.
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
      const float inv = amax > 0 ? __fdiv_rn(127.0f, amax) : 0.0f;
      const int q0 = __float2int_rn(__fmul_rn(v[p].x, inv)), q1 = __float2int_rn(__fmul_rn(v[p].y, inv));
      const int q2 = __float2int_rn(__fmul_rn(v[p].z, inv)), q3 = __float2int_rn(__fmul_rn(v[p].w, inv));
      int sum = 0;
      if constexpr (kSums) {
        sum = q0 + q1 + q2 + q3;
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      }
      if (g >= nb32) continue;
      xq[g * 8 + word] = (static_cast<uint32_t>(q0) & 0xFF) | ((static_cast<uint32_t>(q1) & 0xFF) << 8) |
                         ((static_cast<uint32_t>(q2) & 0xFF) << 16) | (static_cast<uint32_t>(q3) << 24);
      if (l8 == 0) {
        const float d = __fdiv_rn(amax, 127.0f);
        d16[g] = __half2float(__float2half_rn(d));
        if constexpr (kSums) s16[g] = __half2float(__float2half_rn(__fmul_rn(d, static_cast<float>(sum))));
      }
    }
  }
}

// acc[j][r] += this lane's share of weight row rows[j] times x row r. U
// blocks of each row loaded ahead.
template <QuantFormat F, int N, int RR>
__device__ inline void int8_rows(const uint8_t* const (&rows)[RR], int64_t nb, const XShared& xs, int lane,
                                 float (&acc)[RR][N]) {
  using D = Int8Dot<F>;
  constexpr bool kMin = F == QuantFormat::Q4_1;
  constexpr int U = 8 / RR;
  const int q = lane & 3;
  for (int64_t b0 = lane >> 2; b0 < nb; b0 += 8 * U) {
    Raw raw[U][RR];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < RR; ++j)
        if (b0 + 8 * u < nb) raw[u][j] = D::load(rows[j] + (b0 + 8 * u) * D::kBytes, q);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t b = b0 + 8 * u;
      if (b >= nb) break;
      int2 xv[N];
      float xd[N], xm[N];
#pragma unroll
      for (int r = 0; r < N; ++r) {
        xv[r] = xs.q[(r * nb + b) * 4 + q];
        xd[r] = xs.d16[r * nb + b];
        xm[r] = kMin && q == 0 ? xs.s16[r * nb + b] : 0.0f;  // the block's min term, counted once
      }
#pragma unroll
      for (int j = 0; j < RR; ++j) {
        const float wd = f16_lo(raw[u][j].s);
#pragma unroll
        for (int r = 0; r < N; ++r) {
          float a = fmaf(static_cast<float>(D::dot(raw[u][j], xv[r])), __fmul_rn(wd, xd[r]), acc[j][r]);
          if constexpr (kMin) a = fmaf(f16_lo(raw[u][j].s >> 16), xm[r], a);
          acc[j][r] = a;
        }
      }
    }
  }
}

template <QuantFormat F, int N, int MODE>
__global__ void __launch_bounds__(kWarps * 32) int8x_gemv_kernel(Segments sg, const float* __restrict__ x,
                                                                 const float* __restrict__ res, int64_t groups) {
  constexpr int RR = MODE == gemv::kSwiGlu ? 2 : 1;
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t k = sg.w[0].k, nb = k / 32;
  // Overlapped with the kernel before (pdl.cuh): wait for its output (x, res).
  wait_for_previous_kernel();
  let_next_kernel_start();
  round_x<Int8Dot<F>::kPaired, F == QuantFormat::Q4_1>(x, N * nb, smem);
  __syncthreads();
  const XShared xs{reinterpret_cast<const int2*>(smem), reinterpret_cast<const float*>(smem + N * k),
                   reinterpret_cast<const float*>(smem + N * k) + N * nb};
  const int lane = threadIdx.x & 31;
  for (int64_t group = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); group < groups;
       group += int64_t(gridDim.x) * kWarps) {
    int64_t row = group;
    int seg = 0;
    if constexpr (MODE == gemv::kMulti) {
      const int64_t m0 = sg.w[0].m, m01 = m0 + sg.w[1].m;
      seg = row < m0 ? 0 : row < m01 ? 1 : 2;
      row -= seg == 0 ? 0 : seg == 1 ? m0 : m01;
    }
    // Copied by constant indices (a dynamic index would move sg to local memory).
    const uint8_t* data = sg.w[0].data;
    int64_t row_bytes = sg.w[0].row_bytes, m = sg.w[0].m;
    float* y = sg.y[0];
    if (seg == 1) data = sg.w[1].data, row_bytes = sg.w[1].row_bytes, m = sg.w[1].m, y = sg.y[1];
    if (seg == 2) data = sg.w[2].data, row_bytes = sg.w[2].row_bytes, m = sg.w[2].m, y = sg.y[2];
    const uint8_t* rows[RR];
    rows[0] = data + row * row_bytes;
    if constexpr (MODE == gemv::kSwiGlu) rows[1] = sg.w[1].data + row * sg.w[1].row_bytes;
    float acc[RR][N];
#pragma unroll
    for (int j = 0; j < RR; ++j)
#pragma unroll
      for (int r = 0; r < N; ++r) acc[j][r] = 0.0f;
    int8_rows<F, N, RR>(rows, nb, xs, lane, acc);
#pragma unroll
    for (int j = 0; j < RR; ++j)
#pragma unroll
      for (int r = 0; r < N; ++r)
        for (int o = 16; o > 0; o >>= 1) acc[j][r] += __shfl_xor_sync(0xffffffffu, acc[j][r], o);
    if (lane != 0) continue;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const int64_t o = r * m + row;
      float v = acc[0][r];
      if constexpr (MODE == gemv::kResidual) v = res[o] + v;
      if constexpr (MODE == gemv::kSwiGlu) v = gemv::silu_f(v) * acc[RR - 1][r];
      y[o] = v;
    }
  }
}

int device_attr(cudaDeviceAttr a) {
  int dev = 0, v = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&v, a, dev));
  return v;
}

size_t max_shared_bytes() {
  static const size_t v = static_cast<size_t>(device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  return v;
}

// Blocks of `kernel` resident per SM with `smem` bytes each, asked once per
// (kernel, size); the first ask also lifts the kernel's shared-memory cap.
int resident_blocks(const void* kernel, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<const void*, size_t>, int> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find({kernel, smem});
  if (it != known.end()) return it->second;
  if (smem > 48 * 1024)
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int blocks = 0;
  CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kWarps * 32, smem));
  return known[{kernel, smem}] = blocks > 0 ? blocks : 1;
}

template <QuantFormat F, int N, int MODE>
void launch_fnm(const Segments& sg, const float* x, const float* res) {
  int64_t groups = 0;
  for (int i = 0; i < (MODE == gemv::kSwiGlu ? 1 : sg.count); ++i) groups += sg.w[i].m;
  const size_t smem = shared_bytes(F, N, sg.w[0].k);
  auto* kernel = int8x_gemv_kernel<F, N, MODE>;
  static const int sms = device_attr(cudaDevAttrMultiProcessorCount);
  const int64_t wanted = (groups + kWarps - 1) / kWarps;
  const int64_t cap = int64_t(sms) * resident_blocks(reinterpret_cast<const void*>(kernel), smem);
  const unsigned grid = static_cast<unsigned>(wanted < cap ? wanted : cap);
  launch_overlapped_smem(kernel, dim3(grid), dim3(kWarps * 32), smem, sg, x, res, groups);
}

template <QuantFormat F, int MODE>
void launch_fm(const Segments& sg, const float* x, const float* res, int64_t n) {
  dispatch_rows(n, "int8-activation gemv", [&](auto nc) { launch_fnm<F, decltype(nc)::value, MODE>(sg, x, res); });
}

template <QuantFormat F>
void launch_f(const Segments& sg, int mode, const float* x, const float* res, int64_t n) {
  switch (mode) {
    case gemv::kPlain: return launch_fm<F, gemv::kPlain>(sg, x, res, n);
    case gemv::kResidual: return launch_fm<F, gemv::kResidual>(sg, x, res, n);
    case gemv::kSwiGlu: return launch_fm<F, gemv::kSwiGlu>(sg, x, res, n);
    case gemv::kMulti: return launch_fm<F, gemv::kMulti>(sg, x, res, n);
    default: fail(ErrorKind::Internal, "int8-activation gemv: mode ", mode);
  }
}

bool int8x_format(QuantFormat f) {
  return f == QuantFormat::Q8_0 || f == QuantFormat::Q4_0 || f == QuantFormat::Q4_1;
}

}  // namespace

bool int8x_gemv_applies(const Segments& sg, int mode, int64_t n) {
  const QuantMatrix& w0 = sg.w[0];
  if (!int8x_format(w0.format) || n < 1 || n > kGemvMaxRows || w0.k % 32 != 0) return false;
  for (int i = 0; i < (mode == gemv::kSwiGlu ? 2 : sg.count); ++i)
    if ((reinterpret_cast<uintptr_t>(sg.w[i].data) & 1) != 0 || sg.w[i].row_bytes % 2 != 0 ||
        sg.w[i].format != w0.format || sg.w[i].k != w0.k)
      return false;
  int64_t values = 0;
  for (int i = 0; i < (mode == gemv::kSwiGlu ? 2 : sg.count); ++i) values += sg.w[i].m * sg.w[i].k;
  // Launches over fewer weight values keep float32 x: there the rounding
  // prologue's latency outweighs the faster reads (bench/RESULTS.md).
  return values >= tuning().qgemv_int8_min_values && shared_bytes(w0.format, n, w0.k) <= max_shared_bytes();
}

void launch_int8x_gemv(const Segments& sg, int mode, const float* x, const float* res, int64_t n) {
  switch (sg.w[0].format) {
    case QuantFormat::Q8_0: launch_f<QuantFormat::Q8_0>(sg, mode, x, res, n); break;
    case QuantFormat::Q4_0: launch_f<QuantFormat::Q4_0>(sg, mode, x, res, n); break;
    case QuantFormat::Q4_1: launch_f<QuantFormat::Q4_1>(sg, mode, x, res, n); break;
    default: fail(ErrorKind::Internal, "int8-activation gemv: format");
  }
  CUDA_LAUNCH_OK();
}

}  // namespace ingot::cuda
