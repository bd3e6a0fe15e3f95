// The CUDA side of kv/batched_rows.h: checks that a batch suits the batched
// kernels of backend/cuda/batched_rows.cu and launches them.
#include "kv/contiguous_cuda.h"

#include "backend/cuda/kernels.h"
#include "kv/batched_rows.h"

namespace ingot::kv {

namespace {

Tensor step_cuda(const std::vector<RowsKV>& rows, DType dtype, const LayerSpec& spec, const Tensor& q_in,
                 const Tensor& k_in, const Tensor& v_in, const Tensor& positions, const AttnParams& p) {
  const auto n = static_cast<int64_t>(rows.size());
  for (const Tensor* t : {&q_in, &k_in, &v_in, &positions})
    if (t->device() != Device::CUDA) return {};
  if (q_in.dtype() != DType::F32 || positions.dtype() != DType::I32 || k_in.dtype() != v_in.dtype() ||
      k_in.ndim() != 3 || v_in.ndim() != 3 || k_in.dim(1) != spec.kv_heads || k_in.dim(2) != spec.head_dim ||
      v_in.dim(1) != spec.kv_heads || v_in.dim(2) != spec.v_head_dim || q_in.dim(1) % spec.kv_heads != 0 ||
      q_in.dim(2) != spec.head_dim)
    return {};
  Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), pos = positions.contiguous();
  std::vector<cuda::KvRowsDesc> desc(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) desc[i] = {rows[i].k, rows[i].v, rows[i].kv_len, rows[i].keys};
  const int64_t ke = spec.kv_heads * spec.head_dim, ve = spec.kv_heads * spec.v_head_dim;
  if (!cuda::launch_write_kv_rows(desc.data(), n, k.raw(), v.raw(), k.dtype(), dtype, pos.data<int32_t>(), ke, ve))
    return {};
  const int64_t h = q.dim(1);
  Tensor out = Tensor::empty({n, h, spec.v_head_dim}, DType::F32, Device::CUDA);
  cuda::launch_attention_rows(q.data<float>(), desc.data(), n, dtype, out.data<float>(), h, spec.head_dim,
                              spec.kv_heads, spec.v_head_dim, p);
  return out;
}

}  // namespace

RowsStepFn rows_cuda_kernel() { return &step_cuda; }

}  // namespace ingot::kv
