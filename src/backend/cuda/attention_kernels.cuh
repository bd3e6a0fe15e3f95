// The attention kernels, templated on how K/V rows are addressed (a
// contiguous buffer here, a paged block table in paged.cu), so every store
// runs the same arithmetic: one block per (query, head, key split), keys in
// tiles of the block size with an online softmax; merge_splits_kernel
// combines the splits of a flash-decoding launch. Prefill over bf16 rows
// takes the tensor-core kernel of attention_mma.cuh instead. Included by attention.cu
// and paged.cu only.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tuning.h"
#include "tensor/tensor.h"

namespace ingot::cuda::attn {

// Host side (attention.cu): the key splits of a launch.
int64_t split_count(int64_t rows, int64_t keys);
// The blocks split_count aims a launch at (Tuning::split_blocks_per_sm x SMs).
int64_t split_target();
// split_count's rule for `target` blocks, in one place for the host and for
// kernels that plan each row's splits from a key count in device memory.
__host__ __device__ inline int64_t split_rule(int64_t target, int64_t rows, int64_t keys) {
  constexpr int64_t tile = 128;  // kTile
  if (target <= 0 || rows >= target || keys <= 2 * tile) return 1;
  const int64_t by_blocks = (target + rows - 1) / rows, by_keys = keys / tile;
  const int64_t s = by_blocks < by_keys ? by_blocks : by_keys;
  return s > 1 ? s : 1;
}

// Internal to each including file (each compiles its own kernels).
namespace {

constexpr int kTile = 128;
static_assert(kTile == 128, "split_rule assumes 128-key tiles");
constexpr int64_t kGroupMinRows = 16;  // query rows from which GQA heads share a block
constexpr int kMaxDvPerThread = 4;  // head dims up to 512

template <typename T>
__device__ inline float ld(const T* p, int64_t i);
template <>
__device__ inline float ld<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ inline float ld<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

// q · k over d: bf16 rows in 16-byte loads with four partial sums when the
// row is aligned (K/V stores are), else one element at a time.
template <typename T>
__device__ inline float dot_row(const float* qs, const T* kr, int64_t d) {
  float dot = 0;
  for (int64_t c = 0; c < d; ++c) dot += qs[c] * ld(kr, c);
  return dot;
}
template <>
__device__ inline float dot_row<__nv_bfloat16>(const float* qs, const __nv_bfloat16* kr, int64_t d) {
  if (d % 8 != 0 || (reinterpret_cast<uintptr_t>(kr) & 15) != 0) {
    float dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += qs[c] * __bfloat162float(kr[c]);
    return dot;
  }
  const uint4* kv = reinterpret_cast<const uint4*>(kr);
  float s[4] = {0, 0, 0, 0};
#pragma unroll 4
  for (int64_t c8 = 0; c8 < d / 8; ++c8) {
    uint4 w = __ldg(kv + c8);
    const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 f = __bfloat1622float2(wp[j]);
      s[j] = fmaf(qs[c8 * 8 + 2 * j], f.x, s[j]);
      s[j] = fmaf(qs[c8 * 8 + 2 * j + 1], f.y, s[j]);
    }
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

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
__device__ inline void load8(const T* p, float (&f)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = ld(p, e);
}
template <>
__device__ inline void load8<__nv_bfloat16>(const __nv_bfloat16* p, float (&f)[8]) {
  uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
  const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float2 x = __bfloat1622float2(wp[j]);
    f[2 * j] = x.x;
    f[2 * j + 1] = x.y;
  }
}

// K/V as the kernels read them: key row j of KV head kh dotted with the
// query, eight key values from element 8·c8 (the grouped kernel), and the
// value row of key j (`VRow`: whatever locates it) from which val() reads
// element c. Each thread finds the value row of its key of a tile once and
// leaves it in shared memory, so the value loop reads no block table and
// does no index arithmetic. Contiguous [S, KVH, D] rows here; the paged
// stores' block tables in paged.cu. Same arithmetic in the same order for
// every layout.
template <typename T>
struct DenseKV {
  const T* k;
  const T* v;
  int64_t kvh, d, dv;
  using VRow = const T*;
  __device__ const T* key(int64_t j, int64_t kh) const { return k + (j * kvh + kh) * d; }
  __device__ float dot(const float* qs, int64_t j, int64_t kh) const { return dot_row(qs, key(j, kh), d); }
  __device__ void key8(int64_t j, int64_t kh, int64_t c8, float (&f)[8]) const {
    load8(k + (j * kvh + kh) * d + c8 * 8, f);
  }
  __device__ VRow vrow(int64_t j, int64_t kh) const { return v + (j * kvh + kh) * dv; }
  __device__ float val(const VRow& r, int64_t c) const { return ld(r, c); }
};

// Bytes of shared memory after `floats` floats where a tile's value rows start (aligned for any VRow).
__host__ __device__ constexpr size_t vrow_offset(size_t floats) { return (floats * sizeof(float) + 15) / 16 * 16; }

// Value elements 8·c8 .. 8·c8 + 7 of a value row: one 16-byte load for an
// aligned bf16 row, val() per element otherwise (quantized rows).
template <class KV>
__device__ inline void val8(const KV& kv, const typename KV::VRow& r, int64_t c8, float (&f)[8]) {
  if constexpr (std::is_same_v<typename KV::VRow, const __nv_bfloat16*>) {
    if ((reinterpret_cast<uintptr_t>(r) & 15) == 0) {
      load8(r + c8 * 8, f);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = kv.val(r, c8 * 8 + e);
}

// Keys per split of a key range of `span` keys cut into `splits`: whole
// tiles, so no block runs a tile that is mostly empty (560 keys in 4 splits
// are 256 + 256 + 48 + 0 keys, five tile passes in all, not 4 x 140 keys and
// eight passes); a split left with no keys contributes nothing to the merge.
__device__ inline int64_t split_chunk(int64_t span, int64_t splits) {
  const int64_t tiles = (span + kTile - 1) / kTile;
  return (tiles + splits - 1) / splits * kTile;
}

// Value rows in 8-element slices (attend_block): dv a power of two from 8 to
// 8 * kTile, so that dv / 8 threads cover a row and the block kTile / (dv / 8) rows at once.
__host__ __device__ constexpr bool sliced_values(int64_t dv) { return dv >= 8 && dv <= 8 * kTile && (dv & (dv - 1)) == 0; }

// Shared memory of attend_block for head dims d and dv and value rows of `vrow_bytes`.
__host__ __device__ constexpr size_t attend_smem_bytes(int64_t d, int64_t dv, size_t vrow_bytes) {
  const size_t tile = vrow_offset(static_cast<size_t>(d + kTile + kTile / 32)) + kTile * vrow_bytes;
  const size_t sums = sliced_values(dv) ? static_cast<size_t>(8 * kTile) * sizeof(float) : 0;  // [rows at once][dv]
  return tile > sums ? tile : sums;
}

// One block's work: query head row `qh` [d] at position qpos against keys
// [0, s) of KV head kh, share `split` of `splits` of the key range; writes
// the output row `o` [dv], or with splits > 1 the partials `ml` [2] and
// `part` [dv] of its slot. Shared by attention_kernel and the batched-rows
// kernel (batched_rows.cu), so both do the same arithmetic in the same order.
template <class KV>
__device__ __forceinline__ void attend_block(const float* qh, const KV& kv, float* o, int64_t kh, int64_t d,
                                             int64_t dv, int64_t s, int64_t qpos, const AttnParams& p,
                                             int64_t splits, int64_t split, float* ml, float* part, float* smem) {
  float* qs = smem;         // [d]
  float* ps = smem + d;     // [kTile]
  float* red = ps + kTile;  // [kTile / 32]
  using VRow = typename KV::VRow;
  VRow* vr = reinterpret_cast<VRow*>(reinterpret_cast<char*>(smem) + vrow_offset(d + kTile + kTile / 32));  // [kTile]
  int64_t hi = p.causal ? min(s - 1, qpos) : s - 1;
  const int64_t lo_all = p.window > 0 ? max(static_cast<int64_t>(0), qpos - p.window + 1) : 0;
  // This block's share of [lo_all, hi]: split `split` of `splits`.
  const int64_t chunk = split_chunk(hi - lo_all + 1, splits);
  const int64_t lo = lo_all + split * chunk;
  const int64_t hi_all = hi;
  hi = min(hi_all, lo + chunk - 1);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) qs[c] = qh[c];
  __syncthreads();
  float acc[kMaxDvPerThread] = {0, 0, 0, 0};
  float m = -INFINITY, l = 0;
  // Sliced values: thread t sums dims 8·(t % per_row) .. + 7 over the tile's
  // rows t / per_row, t / per_row + rows_at_once, ...: 16-byte loads, several
  // rows in flight; the row groups are added in order at the end.
  const bool sliced = sliced_values(dv);
  const int per_row = sliced ? static_cast<int>(dv / 8) : 1, rows_at_once = kTile / per_row;
  const int vg = static_cast<int>(threadIdx.x) / per_row, c8 = static_cast<int>(threadIdx.x) % per_row;
  float acc8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t t0 = lo; t0 <= hi; t0 += kTile) {
    int64_t j = t0 + threadIdx.x;
    float score = -INFINITY;
    if (j <= hi) {
      vr[threadIdx.x] = kv.vrow(j, kh);
      float dot = kv.dot(qs, j, kh);
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
    if (sliced) {
      float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 4
      for (int64_t jj = vg; jj < n; jj += rows_at_once) {
        float f[8];
        val8(kv, vr[jj], c8, f);
        const float pj = ps[jj];
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = fmaf(pj, f[e], a[e]);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) acc8[e] = acc8[e] * corr + a[e];
    }
    for (int r = 0; r < kMaxDvPerThread && !sliced; ++r) {
      int64_t c = threadIdx.x + r * kTile;
      if (c >= dv) break;
      // Four independent chains so several V loads are in flight.
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t jj = 0;
      for (; jj + 4 <= n; jj += 4) {
        a0 = fmaf(ps[jj], kv.val(vr[jj], c), a0);
        a1 = fmaf(ps[jj + 1], kv.val(vr[jj + 1], c), a1);
        a2 = fmaf(ps[jj + 2], kv.val(vr[jj + 2], c), a2);
        a3 = fmaf(ps[jj + 3], kv.val(vr[jj + 3], c), a3);
      }
      for (; jj < n; ++jj) a0 = fmaf(ps[jj], kv.val(vr[jj], c), a0);
      acc[r] = acc[r] * corr + ((a0 + a1) + (a2 + a3));
    }
    m = nm;
    __syncthreads();
  }
  if (sliced) {  // the row groups' sums, added in group order (the tile's buffers are free now)
    float* sums = smem;  // [rows_at_once][dv]
#pragma unroll
    for (int e = 0; e < 8; ++e) sums[vg * dv + c8 * 8 + e] = acc8[e];
    __syncthreads();
    for (int r = 0; r < kMaxDvPerThread; ++r) {
      const int64_t c = threadIdx.x + r * kTile;
      if (c >= dv) break;
      float v = 0;
      for (int g = 0; g < rows_at_once; ++g) v += sums[g * dv + c];
      acc[r] = v;
    }
  }
  if (splits > 1) {
    if (threadIdx.x == 0) {
      ml[0] = m;
      ml[1] = l;
    }
    for (int r = 0; r < kMaxDvPerThread; ++r) {
      int64_t c = threadIdx.x + r * kTile;
      if (c >= dv) break;
      part[c] = acc[r];
    }
    return;
  }
  for (int r = 0; r < kMaxDvPerThread; ++r) {
    int64_t c = threadIdx.x + r * kTile;
    if (c >= dv) break;
    o[c] = l > 0 ? acc[r] / l : 0.0f;
  }
}

template <class KV>
__global__ void attention_kernel(const float* q, KV kv, float* out, int64_t h, int64_t d,
                                 int64_t s, int64_t kvh, int64_t dv, AttnParams p, float* part_ml,
                                 float* part_acc) {
  extern __shared__ __align__(16) float smem[];
  let_next_kernel_start();  // the output projection's GEMV may be scheduled meanwhile (pdl.cuh)
  const int64_t i = blockIdx.x / h, hh = blockIdx.x % h, kh = hh / (h / kvh);
  if (p.kv_len) {
    // Graph-replayed step: the key count lives on the device; the queries are the last rows.
    s = min(s, static_cast<int64_t>(*p.kv_len));
    p.q_offset = s - static_cast<int64_t>(gridDim.x / h);
  }
  const int64_t splits = gridDim.y, slot = (i * h + hh) * splits + blockIdx.y;
  attend_block(q + (i * h + hh) * d, kv, out + (i * h + hh) * dv, kh, d, dv, s, p.q_offset + i, p, splits,
               blockIdx.y, splits > 1 ? part_ml + 2 * slot : nullptr, splits > 1 ? part_acc + slot * dv : nullptr,
               smem);
}

// The G query heads that share one K/V head, in one block: each key and
// value row is read once for all G heads (GQA), G online softmaxes side by
// side. Same split layout and partials as attention_kernel.
template <class KV, int G>
__global__ void attention_group_kernel(const float* q, KV kv, float* out, int64_t h, int64_t d,
                                       int64_t s, int64_t kvh, int64_t dv, AttnParams p, float* part_ml,
                                       float* part_acc) {
  extern __shared__ __align__(16) float smem[];
  float* qs = smem;              // [G * d]
  float* ps = smem + G * d;      // [G * kTile]
  float* red = ps + G * kTile;   // [kTile / 32]
  using VRow = typename KV::VRow;
  VRow* vr = reinterpret_cast<VRow*>(reinterpret_cast<char*>(smem) + vrow_offset(G * d + G * kTile + kTile / 32));
  const int64_t i = blockIdx.x / kvh, kh = blockIdx.x % kvh;
  if (p.kv_len) {
    s = min(s, static_cast<int64_t>(*p.kv_len));
    p.q_offset = s - static_cast<int64_t>(gridDim.x / kvh);
  }
  const int64_t qpos = p.q_offset + i;
  int64_t hi = p.causal ? min(s - 1, qpos) : s - 1;
  const int64_t lo_all = p.window > 0 ? max(static_cast<int64_t>(0), qpos - p.window + 1) : 0;
  const int64_t splits = gridDim.y, chunk = split_chunk(hi - lo_all + 1, splits);
  const int64_t lo = lo_all + blockIdx.y * chunk;
  hi = min(hi, lo + chunk - 1);
  const int64_t h0 = kh * G;  // first query head of the group
  for (int64_t c = threadIdx.x; c < G * d; c += blockDim.x) qs[c] = q[(i * h + h0) * d + c];
  __syncthreads();
  float acc[G][kMaxDvPerThread];
  float m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int r = 0; r < kMaxDvPerThread; ++r) acc[g][r] = 0;
  }
  for (int64_t t0 = lo; t0 <= hi; t0 += kTile) {
    const int64_t j = t0 + threadIdx.x;
    float sc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sc[g] = 0;
    if (j <= hi) {
      vr[threadIdx.x] = kv.vrow(j, kh);
      for (int64_t c8 = 0; c8 < d / 8; ++c8) {
        float f[8];
        kv.key8(j, kh, c8, f);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int e = 0; e < 8; ++e) sc[g] = fmaf(qs[g * d + c8 * 8 + e], f[e], sc[g]);
      }
    }
    float corr[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float score = -INFINITY;
      if (j <= hi) {
        float dot = sc[g] * p.scale;
        if (p.softcap > 0) dot = tanhf(dot / p.softcap) * p.softcap;
        score = dot;
      }
      const float nm = fmaxf(m[g], tile_max(score, red));
      const float pj = j <= hi ? expf(score - nm) : 0.0f;
      corr[g] = expf(m[g] - nm);
      l[g] = l[g] * corr[g] + tile_sum(pj, red);
      ps[g * kTile + threadIdx.x] = pj;
      m[g] = nm;
    }
    __syncthreads();
    const int64_t n = min(static_cast<int64_t>(kTile), hi - t0 + 1);
#pragma unroll
    for (int r = 0; r < kMaxDvPerThread; ++r) {
      const int64_t c = threadIdx.x + r * kTile;
      if (c >= dv) break;
      float a[G];
#pragma unroll
      for (int g = 0; g < G; ++g) a[g] = 0;
      for (int64_t jj = 0; jj < n; ++jj) {
        const float vv = kv.val(vr[jj], c);
#pragma unroll
        for (int g = 0; g < G; ++g) a[g] = fmaf(ps[g * kTile + jj], vv, a[g]);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) acc[g][r] = acc[g][r] * corr[g] + a[g];
    }
    __syncthreads();
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t qh = i * h + h0 + g;
    if (splits > 1) {
      const int64_t slot = qh * splits + blockIdx.y;
      if (threadIdx.x == 0) {
        part_ml[2 * slot] = m[g];
        part_ml[2 * slot + 1] = l[g];
      }
#pragma unroll
      for (int r = 0; r < kMaxDvPerThread; ++r) {
        const int64_t c = threadIdx.x + r * kTile;
        if (c < dv) part_acc[slot * dv + c] = acc[g][r];
      }
    } else {
#pragma unroll
      for (int r = 0; r < kMaxDvPerThread; ++r) {
        const int64_t c = threadIdx.x + r * kTile;
        if (c < dv) out[qh * dv + c] = l[g] > 0 ? acc[g][r] / l[g] : 0.0f;
      }
    }
  }
}

// Merges one (query, head)'s `splits` partials (ml [2 * splits], acc
// [splits * dv]) into o [dv], rescaling every split to the common max. The
// splits' weights exp(m - max) are computed once into shared memory (for up
// to kMergeStaged splits, more than split_count plans), so the sums read no
// ml from global memory; values and order are the direct form's below.
constexpr int kMergeStaged = 1024;
__device__ __forceinline__ void merge_block(const float* ml, const float* part_acc, float* o, int64_t splits,
                                            int64_t dv) {
  __shared__ float wt[kMergeStaged], ls[kMergeStaged];  // the splits' max, then weight; their sums
  __shared__ float total;
  if (splits <= kMergeStaged) {
    for (int64_t sp = threadIdx.x; sp < splits; sp += blockDim.x) {
      wt[sp] = ml[2 * sp];
      ls[sp] = ml[2 * sp + 1];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float mx = -INFINITY;
      for (int64_t sp = 0; sp < splits; ++sp) mx = fmaxf(mx, wt[sp]);
      float l = 0;
      for (int64_t sp = 0; sp < splits; ++sp) {
        wt[sp] = ls[sp] > 0 ? expf(wt[sp] - mx) : 0.0f;
        if (ls[sp] > 0) l += wt[sp] * ls[sp];
      }
      total = l;
    }
    __syncthreads();
    const float l = total;
    for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) {
      float a = 0;
#pragma unroll 8
      for (int64_t sp = 0; sp < splits; ++sp)
        if (ls[sp] > 0) a += wt[sp] * part_acc[sp * dv + c];  // (a split with no keys holds no partials)
      o[c] = l > 0 ? a / l : 0.0f;
    }
    return;
  }
  float mx = -INFINITY;
  for (int64_t sp = 0; sp < splits; ++sp) mx = fmaxf(mx, ml[2 * sp]);
  float l = 0;
  for (int64_t sp = 0; sp < splits; ++sp)
    if (ml[2 * sp + 1] > 0) l += expf(ml[2 * sp] - mx) * ml[2 * sp + 1];
  for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) {
    float a = 0;
    for (int64_t sp = 0; sp < splits; ++sp)
      if (ml[2 * sp + 1] > 0) a += expf(ml[2 * sp] - mx) * part_acc[sp * dv + c];
    o[c] = l > 0 ? a / l : 0.0f;
  }
}

// One block per (query, head).
__global__ void merge_splits_kernel(const float* part_ml, const float* part_acc, float* out, int64_t splits,
                                    int64_t dv) {
  let_next_kernel_start();
  const int64_t qh = blockIdx.x;
  merge_block(part_ml + 2 * qh * splits, part_acc + qh * splits * dv, out + qh * dv, splits, dv);
}



#include "backend/cuda/attention_mma.cuh"

// The partials of a split launch: (max, sum) pairs `ml` [rows * splits * 2]
// and output rows `acc` [rows * splits * dv]; none without splits.
class SplitScratch {
 public:
  SplitScratch(int64_t rows, int64_t splits, int64_t dv) {
    if (splits <= 1) return;
    ml_ = Tensor::empty({rows * splits * 2}, DType::F32, Device::CUDA);
    acc_ = Tensor::empty({rows * splits * dv}, DType::F32, Device::CUDA);
  }
  float* ml() const { return ml_.defined() ? ml_.data<float>() : nullptr; }
  float* acc() const { return acc_.defined() ? acc_.data<float>() : nullptr; }

 private:
  Tensor ml_, acc_;
};

// Plans and launches attention over any K/V addressing: GQA-grouped blocks
// from kGroupMinRows query rows on (when `aligned`: rows of a multiple of 8
// elements in 16-byte-aligned memory), key splits when the blocks would not
// fill the GPU, then the merge.
template <class KV>
void run(const float* q, const KV& kv, bool aligned, float* out, int64_t t, int64_t h, int64_t d, int64_t s,
         int64_t kvh, int64_t dv, const AttnParams& p) {
  if (t == 0) return;
  INGOT_CHECK(dv <= kTile * kMaxDvPerThread, "attention: value head dim ", dv, " too large");
  // Prefill over bf16 rows: the tensor-core kernel (attention_mma.cuh).
  if constexpr (std::is_same_v<typename KV::VRow, const __nv_bfloat16*>) {
    if (mma_applies(q, out, aligned, t, d, dv, p)) {
      run_mma(q, kv, out, t, h, d, s, kvh, p);
      return;
    }
  }
  // Keys a query row sees at most (the last row under a causal mask). With a
  // device key count the host knows only the reserved rows: splits cover them
  // all and splits past the count contribute nothing.
  const int64_t last = p.causal && !p.kv_len ? std::min(s - 1, p.q_offset + t - 1) : s - 1;
  const int64_t keys = p.window > 0 ? std::min(p.window, last + 1) : last + 1;
  // GQA groups of 2, 4 or 8 query heads share their K/V reads; other shapes
  // take one block per head. Decode (few query rows) keeps one block per
  // head: grouping would leave too few blocks (measured on the H200,
  // bench/RESULTS.md).
  const int64_t group = h / kvh;
  const bool many_rows = t >= kGroupMinRows;
  const int G = aligned && d % 8 == 0 && many_rows &&
                        (group == 2 || group == 4 || group == 8)
                    ? static_cast<int>(group)
                    : 1;
  const int64_t splits = split_count(t * h / G, keys);
  const SplitScratch scratch(t * h, splits, dv);
  float *ml_p = scratch.ml(), *acc_p = scratch.acc();
  if (G > 1) {
    dim3 grid(static_cast<unsigned>(t * kvh), static_cast<unsigned>(splits));
    const size_t gsmem =
        vrow_offset(static_cast<size_t>(G * d + G * kTile + kTile / 32)) + kTile * sizeof(typename KV::VRow);
    auto go = [&](auto gc) {
      constexpr int GG = decltype(gc)::value;
      attention_group_kernel<KV, GG><<<grid, kTile, gsmem, stream()>>>(q, kv, out, h, d, s, kvh, dv, p, ml_p, acc_p);
    };
    if (G == 2) go(std::integral_constant<int, 2>{});
    else if (G == 4) go(std::integral_constant<int, 4>{});
    else go(std::integral_constant<int, 8>{});
  } else {
    dim3 grid(static_cast<unsigned>(t * h), static_cast<unsigned>(splits));
    const size_t smem = attend_smem_bytes(d, dv, sizeof(typename KV::VRow));
    attention_kernel<KV><<<grid, kTile, smem, stream()>>>(q, kv, out, h, d, s, kvh, dv, p, ml_p, acc_p);
  }
  CUDA_LAUNCH_OK();
  if (splits > 1) {
    merge_splits_kernel<<<static_cast<unsigned>(t * h), 128, 0, stream()>>>(ml_p, acc_p, out, splits, dv);
    CUDA_LAUNCH_OK();
  }
}

}  // namespace

}  // namespace ingot::cuda::attn
