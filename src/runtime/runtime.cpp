#include "runtime/runtime.h"

#include <unistd.h>

#include <mutex>

#include "backend/cpu/cpu_backend.h"
#include "quant/quant.h"
#include "runtime/device_plugin.h"
#include "util/error.h"

#if defined(INGOT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "runtime/cuda_plugin.h"
#elif defined(INGOT_CUDA_MODULE)
#include "runtime/cuda_module.h"
#endif

namespace ingot::runtime {

void init_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    DevicePlugin cpu;  // host memory and the paged kernels' CPU defaults need no hooks
    cpu.backend = cpu::backend();
    register_device(cpu);
    quant::install_cpu_kernels();  // the CPU backend's per-format tables
#ifdef INGOT_HAVE_CUDA
    if (cuda::available()) register_device(cuda_plugin());
#endif
  });
}

void enable_device(Device d) {
  if (d != Device::CUDA) return;
#if defined(INGOT_CUDA_MODULE)
  const CudaModule& m = cuda_module();
  if (!m.loaded) fail(ErrorKind::Unsupported, "--device cuda: the CUDA backend could not be loaded (", m.error, ")");
  static std::once_flag once;
  std::call_once(once, [&m] {
    if (!m.available()) return;
    DevicePlugin p;
    m.plugin(&p);
    register_device(p);
  });
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
