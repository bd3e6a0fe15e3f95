// The per-ISA leaf kernels. Each instruction-set level fills one table in its
// own translation unit (compiled with that level's flags); kernels.cpp picks
// the table at run time and does all threading. Leaf kernels are
// single-threaded and touch only raw pointers.
#pragma once
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "tensor/dtype.h"


namespace ingot::cpu {

// One block of a dense linear: y[i * ldy + j] = dot(x[i * ldx ...], w[j * ldw ...]) for
// i in [0, n), j in [0, m). `w` points at row 0 of the block.
struct LinearBlock {
  const float* x;
  int64_t ldx, n, k;
  const void* w;
  DType wdt;
  int64_t ldw, m;
  float* y;
  int64_t ldy;
};

// One tile of kAttnTile key lanes of one KV head folded into the
// online-softmax state of G query vectors (attention.h). Lanes [x0, x0 + n)
// hold the n rows of k and v; query vector g sees lanes [first[g], last[g]]
// (clipped to those; empty: its state is untouched).
struct AttnFold {
  const float* q;  // [G, d]
  int64_t G, d, dv;
  const void* k;  // n rows of d values, k_ld elements apart
  const void* v;  // n rows of dv values, v_ld elements apart
  DType dt;       // of k and v: f32, bf16 or f16
  int64_t k_ld, v_ld, x0, n;
  const int64_t* first;
  const int64_t* last;
  float scale, softcap;
  float* m;       // [G] running maxima (-inf before any key)
  float* l;       // [G] running sums of exp(score - m)
  float* acc;     // [G, dv] running sums of exp(score - m) * v
  float* scores;   // scratch [G, kAttnTile]
  float* convert;  // scratch [kAttnTile, d + dv]: 16-bit rows widened once
};

struct KernelTable {
  const char* name;
  int lanes;  // accumulator width of every dot product on this level
  // `scratch` holds at least linear_scratch_floats(k) floats.
  void (*linear_block)(const LinearBlock& b, float* scratch);
  // The same product in outer-product form (linear_bulk); `scratch` holds
  // bulk_scratch_floats(b.m) floats.
  void (*linear_bulk_block)(const LinearBlock& b, float* scratch);
  // dot(a, b[0..k)) with b of dtype bdt (f32 / bf16 / f16) in the same order as linear_block.
  float (*dot)(const float* a, const void* b, DType bdt, int64_t k);
  // out[r] = dot(a, b + r * ldb) for r < rows, each exactly as dot() computes it.
  void (*dot_rows)(const float* a, const void* b, DType bdt, int64_t ldb, int64_t rows, int64_t k,
                   float* out);
  // y[0..n) += a * x[0..n) with x of dtype xdt.
  void (*axpy)(float a, const void* x, DType xdt, float* y, int64_t n);
  float (*sum_squares)(const float* x, int64_t n);
  float (*sum)(const float* x, int64_t n);
  // y = x * s * w (w may be null: y = x * s); unit_offset applies (1 + w).
  void (*scale_by)(const float* x, float s, const float* w, bool unit_offset, float* y, int64_t n);
  void (*to_f32)(const void* src, DType t, int64_t n, float* dst);
  // y = silu(g) * u; u null: y = silu(g).
  void (*silu_mul)(const float* g, const float* u, float* y, int64_t n);
  // y = x * Phi(x) (GELU with erf), vector erf within 1.5e-7.
  void (*gelu)(const float* x, float* y, int64_t n);
  // One row: y = softmax(x) with the vector exp.
  void (*softmax)(const float* x, float* y, int64_t n);
  // One row: y = (x - mean) / sqrt(var + eps) * w + b (b may be null).
  void (*layer_norm)(const float* x, const float* w, const float* b, float eps, float* y, int64_t n);
  void (*attn_fold)(const AttnFold& f);
  // Query vectors per prompt block of attention (attention.cpp's Plan).
  int attn_block_vectors;
};

// Weight rows per unit of the dense linear's thread split (kernels.cpp).
constexpr int64_t kMaxPanelRows = 8;
// 16-bit weight rows converted to f32 at once by linear_block: about 256 KiB,
// so the group and a block of x rows share L2; whole 4-row panels.
inline int64_t linear_group_rows(int64_t k) {
  const int64_t rows = (64 * 1024 / (k + 16)) / 4 * 4;
  return rows < 4 ? 4 : rows;
}
inline int64_t linear_scratch_floats(int64_t k) { return linear_group_rows(k) * (k + 16); }
// Bulk GEMM: k in blocks of kBulkK; a block's weight columns packed per k block plus one row.
constexpr int64_t kBulkK = 256;
inline int64_t bulk_scratch_floats(int64_t m) { return (m + 32) * kBulkK + kBulkK; }

const KernelTable& kernels_portable();
const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();

}  // namespace ingot::cpu
