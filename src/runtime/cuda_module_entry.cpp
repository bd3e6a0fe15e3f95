// The C entry points of libingot_cuda.so, the CUDA backend built as a module
// that the runtime opens only when a command asks for --device cuda (so the
// CPU path never loads cudart or cuBLAS). The module binds to the ingot
// symbols of the executable that opens it (built with exported symbols), and
// hands over its device plug-in for the executable's runtime to register.
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "runtime/cuda_plugin.h"

extern "C" {

// Bumped whenever these entry points or runtime::DevicePlugin change.
__attribute__((visibility("default"))) int ingot_cuda_module_abi() { return 3; }
__attribute__((visibility("default"))) bool ingot_cuda_module_available() {
  return ingot::cuda::available();
}
__attribute__((visibility("default"))) void ingot_cuda_module_plugin(ingot::runtime::DevicePlugin* out) {
  *out = ingot::runtime::cuda_plugin();
}
__attribute__((visibility("default"))) int64_t ingot_cuda_module_total_memory() {
  return ingot::cuda::total_memory_bytes();
}

}  // extern "C"
