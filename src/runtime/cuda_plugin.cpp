#include "runtime/cuda_plugin.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/sample_rows_cuda.h"
#include "kv/contiguous_cuda.h"
#include "kv/paged_cuda.h"

namespace ingot::runtime {

DevicePlugin cuda_plugin() {
  DevicePlugin p;
  p.device = Device::CUDA;
  p.backend = cuda::backend();
  p.allocate = &cuda::allocate;
  p.copy = &cuda::copy;
  p.strided_copy = &cuda::strided_copy;
  p.pinned_host = &cuda::allocate_pinned_host;
  p.gather = &cuda::gather_to_host;
  p.sample_rows = &cuda::sample_rows_cuda;
  p.paged = kv::paged_cuda_kernels();
  p.rows = kv::rows_cuda_kernel();
  return p;
}

}  // namespace ingot::runtime
