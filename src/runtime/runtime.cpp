#include "runtime/runtime.h"

#include "backend/cpu/cpu_backend.h"
#include "quant/quant.h"

#ifdef INGOT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ingot::runtime {

void init_backends() {
  cpu::install();
  quant::install_cpu_kernels();
#ifdef INGOT_HAVE_CUDA
  cuda::try_install();
#endif
}

bool cuda_available() {
#ifdef INGOT_HAVE_CUDA
  return cuda::available();
#else
  return false;
#endif
}

}  // namespace ingot::runtime
