// Decode rows of many sequences in one launch each: the K/V write and the
// attention of a step where every sequence brings one token and keeps its
// own contiguous K/V buffers. Row i of a launch reads its sequence's buffers
// and key count from a descriptor passed by value (a captured graph keeps
// it, so nothing is uploaded per step), and runs the body of
// attention_kernel with the split plan launch_attention makes for that row
// alone: each row's output is bit-identical to the per-sequence launch.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention_kernels.cuh"

namespace ingot::cuda {

namespace {

struct RowKV {
  const void* k;
  const void* v;
  const int32_t* kv_len;
  int64_t s;
  int64_t splits;  // key splits of this row; blocks past it return at once
};
struct RowsArg {
  RowKV r[kMaxBatchedRows];
};
struct RowDst {
  void* k;
  void* v;
  int64_t rows;  // rows of the buffers a position may name
};
struct DstArg {
  RowDst r[kMaxBatchedRows];
};

template <typename S, typename D>
__device__ inline D convert(S x);
template <>
__device__ inline float convert<float, float>(float x) { return x; }
template <>
__device__ inline __nv_bfloat16 convert<float, __nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ inline __nv_bfloat16 convert<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16 x) { return x; }

// One block per (row, plane): row i of k (plane 0) or v (plane 1) into its
// sequence's buffer at positions[i]; positions outside the buffer are skipped.
template <typename S, typename D>
__global__ void write_kv_rows_kernel(DstArg dst, const S* k, const S* v, const int32_t* positions, int64_t k_elems,
                                     int64_t v_elems) {
  const int64_t i = blockIdx.x;
  const bool is_v = blockIdx.y == 1;
  const int64_t pos = positions[i];
  if (pos < 0 || pos >= dst.r[i].rows) return;
  const int64_t e = is_v ? v_elems : k_elems;
  const S* src = (is_v ? v : k) + i * e;
  D* out = static_cast<D*>(is_v ? dst.r[i].v : dst.r[i].k) + pos * e;
  for (int64_t c = threadIdx.x; c < e; c += blockDim.x) out[c] = convert<S, D>(src[c]);
}

template <typename T>
__global__ void attention_rows_kernel(const float* q, RowsArg rows, float* out, int64_t h, int64_t d, int64_t kvh,
                                      int64_t dv, AttnParams p, int64_t max_splits, float* part_ml, float* part_acc) {
  let_next_kernel_start();  // (pdl.cuh)
  extern __shared__ __align__(16) float smem[];
  const int64_t i = blockIdx.x / h, hh = blockIdx.x % h, kh = hh / (h / kvh);
  const RowKV& r = rows.r[i];
  if (static_cast<int64_t>(blockIdx.y) >= r.splits) return;  // the whole block: no barrier is left waiting
  int64_t s = r.s;
  if (r.kv_len) s = min(s, static_cast<int64_t>(*r.kv_len));
  const attn::DenseKV<T> kv{static_cast<const T*>(r.k), static_cast<const T*>(r.v), kvh, d, dv};
  const int64_t slot = (i * h + hh) * max_splits + blockIdx.y;
  // One query per sequence, its last position: q_offset = s - 1 as in the per-sequence launch.
  attn::attend_block(q + (i * h + hh) * d, kv, out + (i * h + hh) * dv, kh, d, dv, s, s - 1, p, r.splits,
                     blockIdx.y, r.splits > 1 ? part_ml + 2 * slot : nullptr,
                     r.splits > 1 ? part_acc + slot * dv : nullptr, smem);
}

__global__ void merge_rows_kernel(const float* part_ml, const float* part_acc, float* out, RowsArg rows, int64_t h,
                                  int64_t max_splits, int64_t dv) {
  let_next_kernel_start();  // (pdl.cuh)
  const int64_t qh = blockIdx.x, splits = rows.r[qh / h].splits;
  if (splits <= 1) return;  // written by the attention kernel itself
  attn::merge_block(part_ml + 2 * qh * max_splits, part_acc + qh * max_splits * dv, out + qh * dv, splits, dv);
}

template <typename T>
void attention_rows(const float* q, const KvRowsDesc* rows, int64_t n, float* out, int64_t h, int64_t d, int64_t kvh,
                    int64_t dv, const AttnParams& p) {
  RowsArg a{};
  int64_t max_splits = 1;
  for (int64_t i = 0; i < n; ++i) {
    // The plan of attn::run for one query row over s keys (t = 1: one block per head).
    const int64_t keys = p.window > 0 ? std::min(p.window, rows[i].s) : rows[i].s;
    a.r[i] = RowKV{rows[i].k, rows[i].v, rows[i].kv_len, rows[i].s, attn::split_count(h, keys)};
    max_splits = std::max(max_splits, a.r[i].splits);
  }
  const attn::SplitScratch scratch(n * h, max_splits, dv);
  float *ml_p = scratch.ml(), *acc_p = scratch.acc();
  dim3 grid(static_cast<unsigned>(n * h), static_cast<unsigned>(max_splits));
  const size_t smem = attn::attend_smem_bytes(d, dv, sizeof(const T*));
  attention_rows_kernel<T><<<grid, attn::kTile, smem, stream()>>>(q, a, out, h, d, kvh, dv, p, max_splits, ml_p, acc_p);
  CUDA_LAUNCH_OK();
  if (max_splits > 1) {
    merge_rows_kernel<<<static_cast<unsigned>(n * h), 128, 0, stream()>>>(ml_p, acc_p, out, a, h, max_splits, dv);
    CUDA_LAUNCH_OK();
  }
}

template <typename S, typename D>
void write_rows(const KvRowsDesc* rows, int64_t n, const void* k, const void* v, const int32_t* positions,
                int64_t k_elems, int64_t v_elems) {
  DstArg a{};
  for (int64_t i = 0; i < n; ++i) a.r[i] = RowDst{rows[i].k, rows[i].v, rows[i].s};
  dim3 grid(static_cast<unsigned>(n), 2);
  write_kv_rows_kernel<S, D><<<grid, 256, 0, stream()>>>(a, static_cast<const S*>(k), static_cast<const S*>(v),
                                                         positions, k_elems, v_elems);
  CUDA_LAUNCH_OK();
}

}  // namespace

bool launch_write_kv_rows(const KvRowsDesc* rows, int64_t n, const void* k, const void* v, DType src, DType store,
                          const int32_t* positions, int64_t k_elems, int64_t v_elems) {
  using Fn = void (*)(const KvRowsDesc*, int64_t, const void*, const void*, const int32_t*, int64_t, int64_t);
  Fn fn = nullptr;
  if (src == DType::F32 && store == DType::F32) fn = &write_rows<float, float>;
  else if (src == DType::F32 && store == DType::BF16) fn = &write_rows<float, __nv_bfloat16>;
  else if (src == DType::BF16 && store == DType::BF16) fn = &write_rows<__nv_bfloat16, __nv_bfloat16>;
  if (!fn) return false;
  const size_t esz = dtype_size(src);
  for (int64_t b0 = 0; b0 < n; b0 += kMaxBatchedRows) {
    const int64_t nb = std::min(kMaxBatchedRows, n - b0);
    fn(rows + b0, nb, static_cast<const char*>(k) + b0 * k_elems * esz,
       static_cast<const char*>(v) + b0 * v_elems * esz, positions + b0, k_elems, v_elems);
  }
  return true;
}

void launch_attention_rows(const float* q, const KvRowsDesc* rows, int64_t n, DType store, float* out, int64_t h,
                           int64_t d, int64_t kvh, int64_t dv, const AttnParams& p) {
  if (store != DType::F32 && store != DType::BF16)
    fail(ErrorKind::Unsupported, "CUDA batched attention over ", dtype_name(store), " keys");
  INGOT_CHECK(dv <= attn::kTile * attn::kMaxDvPerThread, "attention: value head dim ", dv, " too large");
  INGOT_CHECK(h % kvh == 0, "attention rows: ", h, " heads over ", kvh, " KV heads");
  for (int64_t b0 = 0; b0 < n; b0 += kMaxBatchedRows) {
    const int64_t nb = std::min(kMaxBatchedRows, n - b0);
    const float* qb = q + b0 * h * d;
    float* ob = out + b0 * h * dv;
    if (store == DType::F32) attention_rows<float>(qb, rows + b0, nb, ob, h, d, kvh, dv, p);
    else attention_rows<__nv_bfloat16>(qb, rows + b0, nb, ob, h, d, kvh, dv, p);
  }
}

}  // namespace ingot::cuda
