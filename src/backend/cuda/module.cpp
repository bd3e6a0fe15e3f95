// The C entry points of libingot_cuda.so, the CUDA backend built as a module
// that the runtime opens only when a command asks for --device cuda (so the
// CPU path never loads cudart or cuBLAS). The module binds to the ingot
// symbols of the executable that opens it (built with exported symbols).
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "kv/contiguous_cuda.h"
#include "kv/paged_cuda.h"

extern "C" {

// Bumped whenever these entry points change.
__attribute__((visibility("default"))) int ingot_cuda_module_abi() { return 1; }
__attribute__((visibility("default"))) bool ingot_cuda_module_available() {
  return ingot::cuda::available();
}
__attribute__((visibility("default"))) void ingot_cuda_module_install() {
  ingot::cuda::try_install();
  if (ingot::cuda::available()) {
    ingot::kv::install_paged_cuda();
    ingot::kv::install_rows_cuda();
  }
}
__attribute__((visibility("default"))) int64_t ingot_cuda_module_total_memory() {
  return ingot::cuda::total_memory_bytes();
}

}  // extern "C"
