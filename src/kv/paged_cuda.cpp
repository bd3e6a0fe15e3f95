// The CUDA side of the paged stores: describes a layer pool and a block
// table to the kernels of backend/cuda/paged.cu and paged_write.cu. The table's blocks go to
// the device as their region addresses (four per block), so the kernels
// know nothing of slabs, pools or sequences.
#include "kv/paged_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/paged_rows.h"
#include "backend/cuda/runtime.h"
#include "kv/paged_attention.h"
#include "kv/quant.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot::kv {

namespace {

cuda::PagedBlocks describe(const LayerPool& lp) {
  const PlaneGeometry &k = lp.plane(false), &v = lp.plane(true);
  const KvQuant q = lp.options().quant;
  cuda::PagedBlocks b;
  b.block_size = lp.block_size();
  b.kv_heads = lp.spec().kv_heads;
  b.quant_bits = q == KvQuant::None ? 0 : q == KvQuant::Q8 ? 8 : 4;
  b.elem = lp.elem_dtype();
  b.k_dim = k.dim;
  b.v_dim = v.dim;
  b.k_group = k.group;
  b.v_group = v.group;
  b.k_row_bytes = static_cast<int64_t>(k.row_code_bytes);
  b.v_row_bytes = static_cast<int64_t>(v.row_code_bytes);
  b.k_row_params = static_cast<int64_t>(k.row_param_floats);
  b.v_row_params = static_cast<int64_t>(v.row_param_floats);
  return b;
}

// KV4 rows live in the rotated basis (kv/quant.h): a rotated copy of
// [rows..., dim] float32 x on the device, or x itself rotated in place.
void rotate_in_place(Tensor& y) {
  const int64_t dim = y.dim(-1), n = rotation_block(dim);
  cuda::launch_hadamard_rows(y.data<float>(), y.numel() / dim, dim, n, 1.0f / std::sqrt(static_cast<float>(n)));
}
Tensor rotated(const Tensor& x) {
  Tensor y = x.clone();
  rotate_in_place(y);
  return y;
}

// Region addresses of table[first, first + n) on the device (kept alive by
// the returned tensor; uploads of up to 64 KiB are queued without a wait).
Tensor upload_blocks(const LayerPool& lp, const int32_t* table, int64_t first, int64_t n) {
  std::vector<const uint8_t*> ptrs(static_cast<size_t>(4 * n));
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < 4; ++r) ptrs[static_cast<size_t>(4 * i + r)] = lp.region(r, table[first + i]);
  Tensor host = Tensor::empty({static_cast<int64_t>(ptrs.size() * sizeof(void*))}, DType::U8);
  std::memcpy(host.raw(), ptrs.data(), ptrs.size() * sizeof(void*));
  return host.to(Device::CUDA);
}

// The device copy of one sequence's table as region addresses. A block's
// addresses never change while the pool lives, so only entries whose ids
// differ from what was uploaded go up again (a new block every block_size
// tokens, a copied block after a fork). Every copy is queued on the one
// compute stream, behind the kernels that read the old entries.
struct CudaTableMirror final : TableMirror {
  std::vector<int32_t> ids;  // table entries whose addresses are on the device
  Tensor dev;                // [capacity * 4] addresses
};

// Device addresses of table[first, first + n), and what keeps them alive.
struct DeviceBlocks {
  Tensor keep;
  const uint8_t* const* ptr = nullptr;
};

DeviceBlocks device_blocks(const LayerPool& lp, const int32_t* table, int64_t first, int64_t n,
                           TableMirrorSlot* slot) {
  DeviceBlocks out;
  if (!slot) {
    out.keep = upload_blocks(lp, table, first, n);
    out.ptr = static_cast<const uint8_t* const*>(out.keep.raw());
    return out;
  }
  if (!*slot) *slot = std::make_unique<CudaTableMirror>();
  auto* m = dynamic_cast<CudaTableMirror*>(slot->get());
  INGOT_CHECK(m != nullptr, "paged KV: a table mirror from another device's kernels");
  const int64_t need = first + n;
  const auto have = static_cast<int64_t>(m->ids.size());
  int64_t same = 0;
  while (same < std::min(have, need) && m->ids[static_cast<size_t>(same)] == table[same]) ++same;
  constexpr int64_t kPtrBytes = 4 * sizeof(void*);
  const int64_t cap = m->dev.defined() ? m->dev.numel() / kPtrBytes : 0;
  if (need > cap) {
    const int64_t grown = std::max<int64_t>({need, 2 * cap, 64});
    Tensor bigger = Tensor::empty({grown * kPtrBytes}, DType::U8, Device::CUDA);
    if (same > 0) device_copy(bigger.raw(), Device::CUDA, m->dev.raw(), Device::CUDA, static_cast<size_t>(same * kPtrBytes));
    m->dev = bigger;
  }
  if (same < need) {
    std::vector<const uint8_t*> ptrs(static_cast<size_t>(4 * (need - same)));
    for (int64_t i = same; i < need; ++i)
      for (int r = 0; r < 4; ++r) ptrs[static_cast<size_t>(4 * (i - same) + r)] = lp.region(r, table[i]);
    device_copy(static_cast<uint8_t*>(m->dev.raw()) + same * kPtrBytes, Device::CUDA, ptrs.data(), Device::CPU,
                ptrs.size() * sizeof(void*));
    m->ids.assign(table, table + need);
  }
  out.keep = m->dev;
  out.ptr = static_cast<const uint8_t* const*>(m->dev.raw()) + 4 * first;
  return out;
}

Tensor attend_cuda(const Tensor& q_in, const PagedKV& kv, const AttnParams& p) {
  const LayerPool& lp = *kv.pool;
  Tensor q = q_in.to(Device::CUDA).contiguous();
  if (q.dtype() != DType::F32) fail(ErrorKind::InvalidArgument, "CUDA paged attention: float32 queries, got ", q.describe());
  const int64_t t = q.dim(0), h = q.dim(1), kvh = lp.spec().kv_heads, bs = lp.block_size();
  if (q.ndim() != 3 || q.dim(2) != lp.spec().head_dim || h % kvh != 0)
    fail(ErrorKind::InvalidArgument, "paged attention q ", q.describe(), " does not match the layer (", kvh,
         " KV heads, head dim ", lp.spec().head_dim, ")");
  const int64_t used = (kv.length + bs - 1) / bs;
  if (used > kv.n_blocks || p.q_offset < 0 || p.q_offset + t > kv.length)
    fail(ErrorKind::InvalidArgument, "paged attention of ", t, " queries at ", p.q_offset, " over ", kv.length,
         " cached tokens");
  Tensor out = Tensor::empty({t, h, lp.spec().v_head_dim}, DType::F32, Device::CUDA);
  if (t == 0) return out;
  DeviceBlocks blocks = device_blocks(lp, kv.table, 0, used, kv.mirror);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = blocks.ptr;
  b.open_block = kv.open_block;
  b.open_k = const_cast<float*>(kv.open_k);
  b.open_v = const_cast<float*>(kv.open_v);
  // Dot products are the same in the rotated basis; the output comes back out of it.
  const bool rotate = quant_rotates(lp.options().quant);
  if (rotate) q = rotated(q);
  cuda::launch_paged_attention(q.data<float>(), b, kv.length, out.data<float>(), t, h, p);
  if (rotate) rotate_in_place(out);
  return out;
}

// Row i of q (the last token of its sequence) over kvs[i], all rows in one
// launch when they share one pool (a layer of one engine); else row by row.
Tensor attend_rows_cuda(const Tensor& q_in, const std::vector<PagedKV>& kvs, const AttnParams& p) {
  const int64_t n = static_cast<int64_t>(kvs.size());
  INGOT_CHECK(n > 0 && q_in.ndim() == 3 && q_in.dim(0) == n, "paged attention rows: q ", q_in.describe(), " for ", n,
              " sequences");
  const LayerPool& lp = *kvs[0].pool;
  bool one_pool = true;
  for (const PagedKV& kv : kvs) one_pool = one_pool && kv.pool == &lp;
  if (!one_pool || p.kv_len) {
    std::vector<Tensor> outs;
    for (int64_t i = 0; i < n; ++i) {
      AttnParams pi = p;
      pi.q_offset = kvs[static_cast<size_t>(i)].length - 1;
      outs.push_back(attend_cuda(q_in.slice(0, i, i + 1).contiguous(), kvs[static_cast<size_t>(i)], pi));
    }
    return ops::concat_rows(outs);
  }
  Tensor q = q_in.to(Device::CUDA).contiguous();
  if (q.dtype() != DType::F32) fail(ErrorKind::InvalidArgument, "CUDA paged attention: float32 queries, got ", q.describe());
  const int64_t h = q.dim(1), kvh = lp.spec().kv_heads, bs = lp.block_size();
  if (q.dim(2) != lp.spec().head_dim || h % kvh != 0)
    fail(ErrorKind::InvalidArgument, "paged attention q ", q.describe(), " does not match the layer (", kvh,
         " KV heads, head dim ", lp.spec().head_dim, ")");
  std::vector<DeviceBlocks> keep;  // the tables' device copies, alive until the launch is queued
  std::vector<cuda::PagedRowDesc> rows;
  keep.reserve(kvs.size());
  rows.reserve(kvs.size());
  for (const PagedKV& kv : kvs) {
    const int64_t used = (kv.length + bs - 1) / bs;
    if (kv.length < 1 || used > kv.n_blocks)
      fail(ErrorKind::InvalidArgument, "paged attention row over ", kv.length, " cached tokens in ", kv.n_blocks,
           " blocks");
    keep.push_back(device_blocks(lp, kv.table, 0, used, kv.mirror));
    rows.push_back({keep.back().ptr, kv.length, kv.open_block, kv.open_k, kv.open_v});
  }
  Tensor out = Tensor::empty({n, h, lp.spec().v_head_dim}, DType::F32, Device::CUDA);
  const bool rotate = quant_rotates(lp.options().quant);
  if (rotate) q = rotated(q);
  cuda::launch_paged_attention_rows(q.data<float>(), describe(lp), rows.data(), n, out.data<float>(), h, p);
  if (rotate) rotate_in_place(out);
  return out;
}

void write_cuda(const LayerPool& lp, const int32_t* table, int64_t pos, const Tensor& k, const Tensor& v,
                const OpenBlock& open, TableMirrorSlot* mirror) {
  const int64_t t = k.dim(0), bs = lp.block_size();
  if (t == 0) return;
  INGOT_CHECK(k.device() == Device::CUDA && v.device() == Device::CUDA && k.is_contiguous() && v.is_contiguous());
  const int64_t first = pos / bs, last = (pos + t - 1) / bs;
  DeviceBlocks blocks = device_blocks(lp, table, first, last - first + 1, mirror);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = blocks.ptr;
  b.open_block = open.block;
  b.open_k = open.k;
  b.open_v = open.v;
  if (quant_rotates(lp.options().quant)) {
    Tensor kr = rotated(k), vr = rotated(v);
    cuda::launch_paged_write(b, pos, kr.raw(), vr.raw(), t);
    return;
  }
  INGOT_CHECK(open.block < 0, "exact open-block rows for a ", kv_quant_name(lp.options().quant), " pool");
  cuda::launch_paged_write(b, pos, k.raw(), v.raw(), t);
}

void write_rows_cuda(const LayerPool& lp, const std::vector<PagedRowSlot>& slots, const Tensor& k, const Tensor& v) {
  const auto n = static_cast<int64_t>(slots.size());
  INGOT_CHECK(lp.options().quant == KvQuant::None, "batched paged write into a ", kv_quant_name(lp.options().quant),
              " pool");
  const bool from_f32 = k.dtype() == DType::F32 && v.dtype() == DType::F32;
  INGOT_CHECK(k.device() == Device::CUDA && v.device() == Device::CUDA && k.is_contiguous() && v.is_contiguous() &&
                  (from_f32 || (k.dtype() == lp.elem_dtype() && v.dtype() == lp.elem_dtype())) && k.dim(0) == n &&
                  v.dim(0) == n,
              "batched paged write: k ", k.describe(), " v ", v.describe(), " for ", n, " rows");
  if (n == 0) return;
  const int64_t bs = lp.block_size();
  std::vector<DeviceBlocks> keep;  // the tables' device copies, alive until the launch is queued
  std::vector<cuda::PagedWriteDesc> rows;
  keep.reserve(slots.size());
  rows.reserve(slots.size());
  for (const PagedRowSlot& s : slots) {
    keep.push_back(device_blocks(lp, s.table, s.pos / bs, 1, s.mirror));
    rows.push_back({keep.back().ptr, s.pos % bs});
  }
  cuda::launch_paged_write_rows(describe(lp), rows.data(), n, k.raw(), v.raw(), from_f32);
}

int64_t table_handle_cuda(const LayerPool& lp, const int32_t* table, int64_t n_blocks, TableMirrorSlot* mirror) {
  INGOT_CHECK(mirror != nullptr, "paged KV: a step table handle needs the table's mirror");
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(device_blocks(lp, table, 0, n_blocks, mirror).ptr));
}

Tensor step_rows_cuda(const LayerPool& lp, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                      const Tensor& positions, const Tensor& kv_lens, const Tensor& tables, int64_t max_keys,
                      const AttnParams& p) {
  const int64_t n = q_in.dim(0), h = q_in.dim(1), kvh = lp.spec().kv_heads;
  INGOT_CHECK(step_rows_read(lp.options().quant), "paged step rows in a ", kv_quant_name(lp.options().quant), " pool");
  INGOT_CHECK(q_in.ndim() == 3 && q_in.dim(2) == lp.spec().head_dim && h % kvh == 0 && k_in.dim(0) == n &&
                  v_in.dim(0) == n && positions.numel() == n && kv_lens.numel() == n && tables.numel() == n &&
                  tables.dtype() == DType::I64 && positions.device() == Device::CUDA &&
                  kv_lens.device() == Device::CUDA && tables.device() == Device::CUDA && tables.is_contiguous(),
              "paged step rows: q ", q_in.describe(), " k ", k_in.describe(), " tables ", tables.describe());
  const Tensor q = q_in.to(Device::CUDA).contiguous();
  if (q.dtype() != DType::F32) fail(ErrorKind::InvalidArgument, "CUDA paged attention: float32 queries, got ", q.describe());
  // Float32 rows go as they are: the write rounds or quantizes them.
  const bool f32 = lp.options().quant != KvQuant::None || (k_in.dtype() == DType::F32 && v_in.dtype() == DType::F32);
  const DType dt = f32 ? DType::F32 : lp.elem_dtype();
  const Tensor k = ops::cast(k_in, dt).contiguous(), v = ops::cast(v_in, dt).contiguous();
  const auto t = static_cast<const uint8_t* const* const*>(tables.raw());
  const cuda::PagedBlocks geo = describe(lp);
  cuda::launch_paged_write_step_rows(geo, t, positions.data<int32_t>(), n, k.raw(), v.raw(), dt == DType::F32);
  Tensor out = Tensor::empty({n, h, lp.spec().v_head_dim}, DType::F32, Device::CUDA);
  cuda::launch_paged_attention_step_rows(q.data<float>(), geo, t, kv_lens.data<int32_t>(), n, max_keys,
                                         out.data<float>(), h, p);
  return out;
}

Tensor gather_cuda(const LayerPool& lp, bool is_v, const int32_t* table, int64_t len, int64_t open_block,
                   const float* open, TableMirrorSlot* mirror) {
  const PlaneGeometry& g = lp.plane(is_v);
  const bool quant = lp.options().quant != KvQuant::None;
  Tensor out = Tensor::empty({len, lp.spec().kv_heads, g.dim}, quant ? DType::F32 : lp.elem_dtype(), Device::CUDA);
  if (len == 0) return out;
  const int64_t bs = lp.block_size();
  DeviceBlocks blocks = device_blocks(lp, table, 0, (len + bs - 1) / bs, mirror);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = blocks.ptr;
  b.open_block = open ? open_block : -1;
  (is_v ? b.open_v : b.open_k) = const_cast<float*>(open);
  cuda::launch_paged_gather(b, is_v, out.raw(), len);
  if (quant_rotates(lp.options().quant)) rotate_in_place(out);
  return out;
}

}  // namespace

PagedKernels paged_cuda_kernels() {
  return PagedKernels{&attend_cuda,      &write_cuda,     &gather_cuda,       &attend_rows_cuda,
                      &write_rows_cuda, &step_rows_cuda, &table_handle_cuda};
}

}  // namespace ingot::kv
