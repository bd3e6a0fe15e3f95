#include "runtime/runtime.h"

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "util/error.h"
#include "quant/quant.h"

#ifdef INGOT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "kv/paged_cuda.h"
#endif

namespace ingot::runtime {

void init_backends() {
  cpu::install();
  quant::install_cpu_kernels();
#ifdef INGOT_HAVE_CUDA
  cuda::try_install();
  if (cuda::available()) kv::install_paged_cuda();
#endif
}

int64_t device_memory_bytes(Device d) {
  if (d == Device::CPU) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return static_cast<int64_t>(pages) * size;
  }
#ifdef INGOT_HAVE_CUDA
  if (cuda::available()) return cuda::total_memory_bytes();
#endif
  fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available");
}

bool cuda_available() {
#ifdef INGOT_HAVE_CUDA
  return cuda::available();
#else
  return false;
#endif
}

}  // namespace ingot::runtime
