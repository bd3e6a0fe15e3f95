#include "runtime/runtime.h"

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "util/error.h"
#include "quant/quant.h"

#if defined(INGOT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "kv/contiguous_cuda.h"
#include "kv/paged_cuda.h"
#elif defined(INGOT_CUDA_MODULE)
#include "runtime/cuda_module.h"
#endif

namespace ingot::runtime {

void init_backends() {
  cpu::install();
  quant::install_cpu_kernels();
#ifdef INGOT_HAVE_CUDA
  cuda::try_install();
  if (cuda::available()) {
    kv::install_paged_cuda();
    kv::install_rows_cuda();
  }
#endif
}

void enable_device(Device d) {
  if (d != Device::CUDA) return;
#if defined(INGOT_CUDA_MODULE)
  const CudaModule& m = cuda_module();
  if (!m.loaded) fail(ErrorKind::Unsupported, "--device cuda: the CUDA backend could not be loaded (", m.error, ")");
  m.install();
#endif
}

int64_t device_memory_bytes(Device d) {
  if (d == Device::CPU) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return static_cast<int64_t>(pages) * size;
  }
#if defined(INGOT_HAVE_CUDA)
  if (cuda::available()) return cuda::total_memory_bytes();
#elif defined(INGOT_CUDA_MODULE)
  if (cuda_available()) return cuda_module().total_memory();
#endif
  fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available");
}

bool cuda_available() {
#if defined(INGOT_HAVE_CUDA)
  return cuda::available();
#elif defined(INGOT_CUDA_MODULE)
  const CudaModule& m = cuda_module();
  return m.loaded && m.available();
#else
  return false;
#endif
}

}  // namespace ingot::runtime
