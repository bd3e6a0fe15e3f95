// Opens libingot_cuda.so (the CUDA backend as a module) on first use.
#pragma once
#include <cstdint>
#include <string>

namespace ingot::runtime {

struct CudaModule {
  bool loaded = false;
  std::string error;  // why it did not load
  bool (*available)() = nullptr;
  void (*install)() = nullptr;
  int64_t (*total_memory)() = nullptr;
};

// Looks beside the running executable first, then on the loader's path
// (LD_LIBRARY_PATH). Loaded once; later calls return the same result.
const CudaModule& cuda_module();

}  // namespace ingot::runtime
