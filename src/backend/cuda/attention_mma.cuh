// Prefill attention on the tensor cores, for bf16 K/V rows (contiguous or
// paged) and head dims 64 / 128: a block of 4 warps takes 64 query rows of
// one head, each warp 16 of them, and walks the keys in tiles of 64 staged
// in shared memory. Scores and outputs come from mma.sync m16n8k16 (bf16 in,
// float32 accumulate) with an online softmax in registers.
//
// Accuracy: K and V are bf16 already, so the products that lose precision
// are q (float32) and the probabilities p. Each is split into a bf16 high
// part and a bf16 remainder (x = hi + lo to ~16 mantissa bits) and both
// halves go through the tensor cores, so scores and outputs stay within
// float32-kernel error (test_cuda_backend holds them to 1e-5 of the CPU)
// at twice the tensor work, which is still a small part of a prefill step.
// Included by attention_kernels.cuh inside its per-file namespace.

constexpr int kMmaRows = 64;         // query rows per block (16 per warp)
constexpr int kMmaKeys = 64;         // keys per shared-memory tile
constexpr int64_t kMmaMinRows = 64;  // prefill chunks from this many rows take this kernel

// mma_bf16 and pack_bf16: mma.cuh.

// x = hi + lo in two bf16 pairs (the remainder is exact in float32).
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float2 hf = __bfloat1622float2(h);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = pack_bf16(x0 - hf.x, x1 - hf.y);
}

template <class KV, int D>
__global__ void __launch_bounds__(128) attention_mma_kernel(const float* __restrict__ q, KV kv,
                                                            float* __restrict__ out, int64_t t, int64_t h,
                                                            int64_t s, int64_t kvh, AttnParams p) {
  constexpr int kStride = D + 8;  // bf16 per staged row: rows land on distinct banks
  __shared__ __align__(16) __nv_bfloat16 ks[kMmaKeys * kStride];
  __shared__ __align__(16) __nv_bfloat16 vs[kMmaKeys * kStride];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  const int64_t hh = blockIdx.y, kh = hh / (h / kvh);
  const int64_t i0 = int64_t(blockIdx.x) * kMmaRows, i_last = min(t, i0 + kMmaRows) - 1;
  const int64_t hi_all = p.causal ? min(s - 1, p.q_offset + i_last) : s - 1;
  const int64_t lo_all = p.window > 0 ? max(int64_t(0), p.q_offset + i0 - p.window + 1) : 0;
  // This thread's two query rows (g and g + 8 of the warp's 16) and their positions.
  const int64_t r0 = i0 + warp * 16 + g, r1 = r0 + 8;
  const int64_t pos0 = p.q_offset + r0, pos1 = p.q_offset + r1;
  // The warp's last row position bounds which key tiles it needs (causal).
  const int64_t warp_hi = p.causal ? min(hi_all, p.q_offset + min(i_last, i0 + warp * 16 + 15)) : hi_all;
  const int64_t warp_lo = p.window > 0 ? max(int64_t(0), p.q_offset + i0 + warp * 16 - p.window + 1) : 0;

  // q fragments (A operand, 16 rows x D), split into high and low bf16 parts.
  uint32_t qa_hi[D / 16][4], qa_lo[D / 16][4];
  {
    const float* q0 = r0 < t ? q + (r0 * h + hh) * D : nullptr;
    const float* q1 = r1 < t ? q + (r1 * h + hh) * D : nullptr;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      const int c = kc * 16 + 2 * tq;
      const float2 a = q0 ? *reinterpret_cast<const float2*>(q0 + c) : make_float2(0, 0);
      const float2 b = q1 ? *reinterpret_cast<const float2*>(q1 + c) : make_float2(0, 0);
      const float2 a8 = q0 ? *reinterpret_cast<const float2*>(q0 + c + 8) : make_float2(0, 0);
      const float2 b8 = q1 ? *reinterpret_cast<const float2*>(q1 + c + 8) : make_float2(0, 0);
      split_pair(a.x, a.y, qa_hi[kc][0], qa_lo[kc][0]);
      split_pair(b.x, b.y, qa_hi[kc][1], qa_lo[kc][1]);
      split_pair(a8.x, a8.y, qa_hi[kc][2], qa_lo[kc][2]);
      split_pair(b8.x, b8.y, qa_hi[kc][3], qa_lo[kc][3]);
    }
  }
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0, l1 = 0;

  for (int64_t t0 = lo_all; t0 <= hi_all; t0 += kMmaKeys) {
    // Stage the tile's K and V rows (zeros past the last key).
    for (int idx = threadIdx.x; idx < kMmaKeys * (D / 8); idx += blockDim.x) {
      const int r = idx / (D / 8), c8 = idx % (D / 8);
      const int64_t j = t0 + r;
      uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
      if (j <= hi_all) {
        kw = __ldg(reinterpret_cast<const uint4*>(kv.key(j, kh)) + c8);
        vw = __ldg(reinterpret_cast<const uint4*>(kv.vrow(j, kh)) + c8);
      }
      *reinterpret_cast<uint4*>(ks + r * kStride + c8 * 8) = kw;
      *reinterpret_cast<uint4*>(vs + r * kStride + c8 * 8) = vw;
    }
    __syncthreads();
    if (t0 <= warp_hi && t0 + kMmaKeys - 1 >= warp_lo) {
      // Scores: 16 rows x 64 keys, 8 tiles of 8 keys.
      float sc[kMmaKeys / 8][4];
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0;
        const __nv_bfloat16* krow = ks + (n * 8 + g) * kStride + 2 * tq;
#pragma unroll
        for (int kc = 0; kc < D / 16; ++kc) {
          const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kc * 16);
          const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kc * 16 + 8);
          mma_bf16(sc[n], qa_hi[kc], b0, b1);
          mma_bf16(sc[n], qa_lo[kc], b0, b1);
        }
      }
      // Scale, soft-cap and mask; the tile's row maxima.
      float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t j = t0 + n * 8 + 2 * tq + (e & 1);
          const int64_t pos = e < 2 ? pos0 : pos1;
          float x = sc[n][e] * p.scale;
          if (p.softcap > 0) x = tanhf(x / p.softcap) * p.softcap;
          const bool ok = j <= hi_all && (!p.causal || j <= pos) && (p.window <= 0 || j > pos - p.window);
          x = ok ? x : -INFINITY;
          sc[n][e] = x;
          if (e < 2) tm0 = fmaxf(tm0, x);
          else tm1 = fmaxf(tm1, x);
        }
#pragma unroll
      for (int off = 1; off <= 2; off <<= 1) {
        tm0 = fmaxf(tm0, __shfl_xor_sync(0xffffffff, tm0, off));
        tm1 = fmaxf(tm1, __shfl_xor_sync(0xffffffff, tm1, off));
      }
      const float nm0 = fmaxf(m0, tm0), nm1 = fmaxf(m1, tm1);
      // A row with no visible key yet keeps a zero base (no inf - inf).
      const float b0 = nm0 == -INFINITY ? 0.0f : nm0, b1 = nm1 == -INFINITY ? 0.0f : nm1;
      const float c0 = expf(m0 - b0), c1 = expf(m1 - b1);
      float ts0 = 0, ts1 = 0;
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        sc[n][0] = expf(sc[n][0] - b0);
        sc[n][1] = expf(sc[n][1] - b0);
        sc[n][2] = expf(sc[n][2] - b1);
        sc[n][3] = expf(sc[n][3] - b1);
        ts0 += sc[n][0] + sc[n][1];
        ts1 += sc[n][2] + sc[n][3];
      }
#pragma unroll
      for (int off = 1; off <= 2; off <<= 1) {
        ts0 += __shfl_xor_sync(0xffffffff, ts0, off);
        ts1 += __shfl_xor_sync(0xffffffff, ts1, off);
      }
      l0 = l0 * c0 + ts0;
      l1 = l1 * c1 + ts1;
      m0 = nm0;
      m1 = nm1;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= c0;
        o[n][1] *= c0;
        o[n][2] *= c1;
        o[n][3] *= c1;
      }
      // Outputs: p (as the A operand, high and low parts) times V (B operand by transposed ldmatrix).
#pragma unroll
      for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
        uint32_t pa_hi[4], pa_lo[4];
        split_pair(sc[2 * kk][0], sc[2 * kk][1], pa_hi[0], pa_lo[0]);
        split_pair(sc[2 * kk][2], sc[2 * kk][3], pa_hi[1], pa_lo[1]);
        split_pair(sc[2 * kk + 1][0], sc[2 * kk + 1][1], pa_hi[2], pa_lo[2]);
        split_pair(sc[2 * kk + 1][2], sc[2 * kk + 1][3], pa_hi[3], pa_lo[3]);
        const int mi = lane >> 3;
        const __nv_bfloat16* vrow = vs + (kk * 16 + (lane & 7) + (mi & 1) * 8) * kStride + (mi >> 1) * 8;
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t v0, v1, v2, v3;
          const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(vrow + np * 16));
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                       : "r"(addr));
          mma_bf16(o[2 * np], pa_hi, v0, v1);
          mma_bf16(o[2 * np], pa_lo, v0, v1);
          mma_bf16(o[2 * np + 1], pa_hi, v2, v3);
          mma_bf16(o[2 * np + 1], pa_lo, v2, v3);
        }
      }
    }
    __syncthreads();  // the next tile overwrites ks and vs
  }
  const float inv0 = l0 > 0 ? 1.0f / l0 : 0.0f, inv1 = l1 > 0 ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int c = n * 8 + 2 * tq;
    if (r0 < t) *reinterpret_cast<float2*>(out + (r0 * h + hh) * D + c) = make_float2(o[n][0] * inv0, o[n][1] * inv0);
    if (r1 < t) *reinterpret_cast<float2*>(out + (r1 * h + hh) * D + c) = make_float2(o[n][2] * inv1, o[n][3] * inv1);
  }
}

// Whether a launch takes the tensor-core kernel: bf16 rows in 16-byte-aligned
// memory, equal K and V head dims of 64 or 128, prefill-sized query blocks,
// keys counted on the host, 8-byte-aligned float32 queries and outputs;
// Tuning::mma_attention off keeps the CUDA-core kernels (tests compare both).
inline bool mma_applies(const float* q, const float* out, bool aligned, int64_t t, int64_t d, int64_t dv,
                        const AttnParams& p) {
  return aligned && t >= kMmaMinRows && d == dv && (d == 64 || d == 128) && !p.kv_len &&
         (reinterpret_cast<uintptr_t>(q) & 7) == 0 && (reinterpret_cast<uintptr_t>(out) & 7) == 0 &&
         tuning().mma_attention;
}

template <class KV>
void run_mma(const float* q, const KV& kv, float* out, int64_t t, int64_t h, int64_t d, int64_t s, int64_t kvh,
             const AttnParams& p) {
  dim3 grid(static_cast<unsigned>((t + kMmaRows - 1) / kMmaRows), static_cast<unsigned>(h));
  if (d == 64)
    attention_mma_kernel<KV, 64><<<grid, 128, 0, stream()>>>(q, kv, out, t, h, s, kvh, p);
  else
    attention_mma_kernel<KV, 128><<<grid, 128, 0, stream()>>>(q, kv, out, t, h, s, kvh, p);
  CUDA_LAUNCH_OK();
}
