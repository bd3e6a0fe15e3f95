// The CPU paged-attention kernel: the pool's blocks presented as the tiles of
// the CPU attention kernel (backend/cpu/attention.h), read in place (no
// gather), KV8/KV4 rows dequantized a tile at a time. Cutting keys at the same
// tile boundaries as a contiguous store, it gives the same bits as one.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "kv/paged_attention.h"
#include "kv/quant.h"
#include "util/error.h"
#include "util/isa_clones.h"

namespace ingot::kv {

namespace {

std::map<Device, PagedKernels>& kernels() {
  static std::map<Device, PagedKernels> m{
      {Device::CPU, PagedKernels{&paged_attention_cpu, &paged_write_cpu, &paged_gather_cpu, &paged_attention_rows_cpu,
                                 nullptr, &paged_step_rows_cpu, &paged_table_handle_cpu}}};
  return m;
}

// Dequantizes n rows of `dim` codes (+ per-group scale, bias) into out, with
// kv::dequantize_values compiled for this clone's ISA.
INGOT_ISA_CLONES
void dequant_tile(KvQuant q, const uint8_t* codes, const float* params, int64_t n, int64_t dim, int64_t group,
                  size_t row_bytes, size_t row_params, float* out) {
  for (int64_t r = 0; r < n; ++r)
    dequantize_values(q, codes + static_cast<size_t>(r) * row_bytes, params + static_cast<size_t>(r) * row_params,
                      dim, group, out + r * dim);
}

// A sequence's K/V in a layer pool as the CPU attention kernel's tiles.
// Tiles inside one block point into the pool (float32 / bf16 / f16 rows) or
// come dequantized (KV8/KV4) into the scratch; with a block size that is not
// a multiple of the tile, rows are converted one at a time.
class PagedKvTiles final : public cpu::KvTiles {
 public:
  PagedKvTiles(const LayerPool& lp, const PagedKV& kv) : lp_(lp), kv_(kv) {}

  void prefetch(int64_t key0, int64_t h, int64_t n) const override {
    const int64_t bs = lp_.block_size();
    if (bs % cpu::kAttnTile != 0) return;
    const int64_t blk = key0 / bs, slot = key0 % bs;
    if (blk == kv_.open_block) return;  // written this step: in the cache
    const int32_t id = kv_.table[blk];
    const auto row0 = static_cast<size_t>(h * bs + slot);
    for (bool is_v : {false, true}) {
      const PlaneGeometry& g = lp_.plane(is_v);
      cpu::prefetch_bytes(lp_.region(is_v ? kVCodes : kKCodes, id) + row0 * g.row_code_bytes,
                          static_cast<size_t>(n) * g.row_code_bytes);
      if (lp_.options().quant != KvQuant::None)
        cpu::prefetch_bytes(reinterpret_cast<const float*>(lp_.region(is_v ? kVParams : kKParams, id)) +
                                row0 * g.row_param_floats,
                            static_cast<size_t>(n) * g.row_param_floats * sizeof(float));
    }
  }

  cpu::KvTile tile(int64_t key0, int64_t h, int64_t n, float* scratch) const override {
    const PlaneGeometry &kg = lp_.plane(false), &vg = lp_.plane(true);
    const int64_t bs = lp_.block_size();
    float* ks = scratch;
    float* vs = scratch + cpu::kAttnTile * kg.dim;
    cpu::KvTile out{ks, vs, DType::F32, kg.dim, vg.dim};
    if (bs % cpu::kAttnTile == 0) {  // the tile's rows lie in one block
      const int64_t blk = key0 / bs, slot = key0 % bs;
      if (blk == kv_.open_block) {
        out.k = kv_.open_k + (h * bs + slot) * kg.dim;
        out.v = kv_.open_v + (h * bs + slot) * vg.dim;
        return out;
      }
      const int32_t id = kv_.table[blk];
      const auto row0 = static_cast<size_t>(h * bs + slot);
      if (lp_.options().quant == KvQuant::None) {
        out.k = lp_.region(kKCodes, id) + row0 * kg.row_code_bytes;
        out.v = lp_.region(kVCodes, id) + row0 * vg.row_code_bytes;
        out.dt = lp_.elem_dtype();
        return out;
      }
      dequant_rows(false, id, row0, n, ks);
      dequant_rows(true, id, row0, n, vs);
      return out;
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t blk = (key0 + r) / bs, slot = (key0 + r) % bs;
      row_f32(false, blk, h, slot, ks + r * kg.dim);
      row_f32(true, blk, h, slot, vs + r * vg.dim);
    }
    return out;
  }

 private:
  void dequant_rows(bool is_v, int32_t id, size_t row0, int64_t n, float* out) const {
    const PlaneGeometry& g = lp_.plane(is_v);
    const uint8_t* codes = lp_.region(is_v ? kVCodes : kKCodes, id) + row0 * g.row_code_bytes;
    const auto* params = reinterpret_cast<const float*>(lp_.region(is_v ? kVParams : kKParams, id)) +
                         row0 * g.row_param_floats;
    dequant_tile(lp_.options().quant, codes, params, n, g.dim, g.group, g.row_code_bytes, g.row_param_floats, out);
  }

  void row_f32(bool is_v, int64_t blk, int64_t h, int64_t slot, float* out) const {
    const PlaneGeometry& g = lp_.plane(is_v);
    const int64_t bs = lp_.block_size();
    if (blk == kv_.open_block) {
      const float* src = (is_v ? kv_.open_v : kv_.open_k) + (h * bs + slot) * g.dim;
      std::memcpy(out, src, static_cast<size_t>(g.dim) * sizeof(float));
      return;
    }
    const int32_t id = kv_.table[blk];
    const auto row = static_cast<size_t>(h * bs + slot);
    if (lp_.options().quant == KvQuant::None)
      cpu::to_f32(lp_.region(is_v ? kVCodes : kKCodes, id) + row * g.row_code_bytes, lp_.elem_dtype(), g.dim, out);
    else
      dequant_rows(is_v, id, row, 1, out);
  }

  const LayerPool& lp_;
  const PagedKV& kv_;
};

}  // namespace

void register_paged_kernels(Device d, const PagedKernels& k) { kernels()[d] = k; }

const PagedKernels* paged_kernels(Device d) {
  auto it = kernels().find(d);
  return it == kernels().end() || !it->second.attend ? nullptr : &it->second;
}

Tensor paged_attention(const Tensor& q, const PagedKV& kv, const AttnParams& p) {
  if (q.device() != kv.pool->device())
    fail(ErrorKind::InvalidArgument, "paged attention: queries on ", device_name(q.device()), ", KV pool on ",
         device_name(kv.pool->device()));
  const PagedKernels* k = paged_kernels(q.device());
  if (!k) fail(ErrorKind::Unsupported, "no paged-attention kernel for device ", device_name(q.device()));
  return k->attend(q, kv, p);
}

namespace {

// Query rows of `q` as float32, rotated into the stored basis for KV4
// (dot products are unchanged; outputs rotate back in unrotate()).
struct PagedQuery {
  Tensor q;
  std::vector<float> rotated;
  const float* rows(const LayerPool& lp, int64_t row0, int64_t n) {
    const int64_t h = q.dim(1), d = q.dim(2);
    const float* src = q.data<float>() + row0 * h * d;
    if (!quant_rotates(lp.options().quant)) return src;
    rotated.assign(src, src + n * h * d);
    for (int64_t r = 0; r < n * h; ++r) hadamard_row(rotated.data() + r * d, d);
    return rotated.data();
  }
};

void unrotate(const LayerPool& lp, float* out, int64_t rows, int64_t dv) {
  if (quant_rotates(lp.options().quant))
    for (int64_t r = 0; r < rows; ++r) hadamard_row(out + r * dv, dv);
}

Tensor f32_contiguous(const Tensor& q) { return q.dtype() == DType::F32 ? q.contiguous() : q.to(DType::F32).contiguous(); }

}  // namespace

Tensor paged_attention_cpu(const Tensor& q_in, const PagedKV& kv, const AttnParams& p) {
  const LayerPool& lp = *kv.pool;
  PagedQuery pq{f32_contiguous(q_in), {}};
  const int64_t t = pq.q.dim(0), h = pq.q.dim(1), d = pq.q.dim(2);
  const int64_t kvh = lp.spec().kv_heads, dv = lp.spec().v_head_dim;
  INGOT_CHECK(d == lp.spec().head_dim && h % kvh == 0, "paged attention q ", pq.q.describe());
  Tensor out = Tensor::empty({t, h, dv}, DType::F32);
  PagedKvTiles tiles(lp, kv);
  cpu::attention_tiled(pq.rows(lp, 0, t), cpu::AttnShape{t, h, kvh, d, dv, kv.length}, tiles, p, out.data<float>());
  unrotate(lp, out.data<float>(), t * h, dv);
  return out;
}

Tensor paged_attention_rows_cpu(const Tensor& q_in, const std::vector<PagedKV>& kvs, const AttnParams& p) {
  const Tensor q = f32_contiguous(q_in);
  const auto n = static_cast<int64_t>(kvs.size());
  INGOT_CHECK(q.ndim() == 3 && q.dim(0) == n && n > 0, "paged attention rows q ", q.describe());
  const LayerPool& lp0 = *kvs[0].pool;
  const int64_t h = q.dim(1), d = q.dim(2), kvh = lp0.spec().kv_heads, dv = lp0.spec().v_head_dim;
  Tensor out = Tensor::empty({n, h, dv}, DType::F32);
  std::vector<PagedQuery> qs(static_cast<size_t>(n));
  std::vector<PagedKvTiles> tiles;
  std::vector<cpu::AttnCall> calls;
  tiles.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const PagedKV& kv = kvs[static_cast<size_t>(i)];
    INGOT_CHECK(kv.pool->spec().kv_heads == kvh && kv.pool->spec().head_dim == d && kv.pool->spec().v_head_dim == dv,
                "paged attention rows: layers of different shapes");
    tiles.emplace_back(*kv.pool, kv);
    PagedQuery& pq = qs[static_cast<size_t>(i)];
    pq.q = q;
    AttnParams pi = p;
    pi.q_offset = kv.length - 1;
    calls.push_back({pq.rows(*kv.pool, i, 1), cpu::AttnShape{1, h, kvh, d, dv, kv.length}, &tiles.back(), pi,
                     out.data<float>() + i * h * dv});
  }
  cpu::attention_tiled_many(calls);
  for (int64_t i = 0; i < n; ++i) unrotate(*kvs[static_cast<size_t>(i)].pool, out.data<float>() + i * h * dv, h, dv);
  return out;
}

int64_t paged_table_handle_cpu(const LayerPool&, const int32_t* table, int64_t, TableMirrorSlot*) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(table));
}

Tensor paged_step_rows_cpu(const LayerPool& lp, const Tensor& q, const Tensor& k_in, const Tensor& v_in,
                           const Tensor& positions_in, const Tensor& kv_lens_in, const Tensor& tables_in,
                           int64_t max_keys, const AttnParams& p) {
  const int64_t n = q.dim(0), bs = lp.block_size();
  INGOT_CHECK(step_rows_read(lp.options().quant), "paged step rows in a ", kv_quant_name(lp.options().quant), " pool");
  INGOT_CHECK(q.ndim() == 3 && k_in.dim(0) == n && v_in.dim(0) == n && positions_in.numel() == n &&
                  kv_lens_in.numel() == n && tables_in.numel() == n && tables_in.dtype() == DType::I64,
              "paged step rows: q ", q.describe(), " k ", k_in.describe(), " tables ", tables_in.describe());
  const DType dt = lp.options().quant == KvQuant::None ? lp.elem_dtype() : DType::F32;  // quantized from float32
  const Tensor k = k_in.to(dt).contiguous(), v = v_in.to(dt).contiguous();
  const std::vector<int32_t> pos = positions_in.to_i32_vector(), lens = kv_lens_in.to_i32_vector();
  const Tensor tables = tables_in.contiguous();
  std::vector<PagedKV> views(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    const auto* table = reinterpret_cast<const int32_t*>(static_cast<intptr_t>(tables.data<int64_t>()[i]));
    INGOT_CHECK(table != nullptr && pos[at] >= 0 && lens[at] == pos[at] + 1 && lens[at] <= max_keys,
                "paged step row ", i, ": position ", pos[at], ", ", lens[at], " keys of at most ", max_keys);
    paged_write_cpu(lp, table, pos[at], k.slice(0, i, i + 1), v.slice(0, i, i + 1), OpenBlock{});
    views[at] = PagedKV{&lp, table, (lens[at] + bs - 1) / bs, lens[at]};
  }
  return paged_attention_rows_cpu(q, views, p);
}

}  // namespace ingot::kv
