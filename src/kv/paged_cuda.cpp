// The CUDA side of the paged stores: describes a layer pool and a block
// table to the kernels of backend/cuda/paged.cu. The table's blocks go to
// the device as their region addresses (four per block), so the kernels
// know nothing of slabs, pools or sequences.
#include "kv/paged_cuda.h"

#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "kv/paged_attention.h"
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
  Tensor blocks = upload_blocks(lp, kv.table, 0, used);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = static_cast<const uint8_t* const*>(blocks.raw());
  cuda::launch_paged_attention(q.data<float>(), b, kv.length, out.data<float>(), t, h, p);
  return out;
}

void write_cuda(const LayerPool& lp, const int32_t* table, int64_t pos, const Tensor& k, const Tensor& v,
                const OpenBlock& open) {
  const int64_t t = k.dim(0), bs = lp.block_size();
  INGOT_CHECK(open.block < 0, "KV4 open blocks are not kept on CUDA");
  if (t == 0) return;
  INGOT_CHECK(k.device() == Device::CUDA && v.device() == Device::CUDA && k.is_contiguous() && v.is_contiguous());
  const int64_t first = pos / bs, last = (pos + t - 1) / bs;
  Tensor blocks = upload_blocks(lp, table, first, last - first + 1);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = static_cast<const uint8_t* const*>(blocks.raw());
  cuda::launch_paged_write(b, pos, k.raw(), v.raw(), t);
}

Tensor gather_cuda(const LayerPool& lp, bool is_v, const int32_t* table, int64_t len, int64_t open_block,
                   const float* open) {
  INGOT_CHECK(open_block < 0 && open == nullptr, "KV4 open blocks are not kept on CUDA");
  const PlaneGeometry& g = lp.plane(is_v);
  const bool quant = lp.options().quant != KvQuant::None;
  Tensor out = Tensor::empty({len, lp.spec().kv_heads, g.dim}, quant ? DType::F32 : lp.elem_dtype(), Device::CUDA);
  if (len == 0) return out;
  const int64_t bs = lp.block_size();
  Tensor blocks = upload_blocks(lp, table, 0, (len + bs - 1) / bs);
  cuda::PagedBlocks b = describe(lp);
  b.blocks = static_cast<const uint8_t* const*>(blocks.raw());
  cuda::launch_paged_gather(b, is_v, out.raw(), len);
  return out;
}

}  // namespace

void install_paged_cuda() { register_paged_kernels(Device::CUDA, PagedKernels{&attend_cuda, &write_cuda, &gather_cuda, /*kv4=*/false}); }

}  // namespace ingot::kv
