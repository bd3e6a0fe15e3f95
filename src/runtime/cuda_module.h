// Opens libingot_cuda.so (the CUDA backend as a module) on first use.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/device_plugin.h"

namespace ingot::runtime {

struct CudaModule {
  bool loaded = false;
  std::string error;  // why it did not load
  bool (*available)() = nullptr;
  void (*plugin)(DevicePlugin* out) = nullptr;  // fills the CUDA device plug-in
  int64_t (*total_memory)() = nullptr;
};

// Looks beside the running executable first, then on the loader's path
// (LD_LIBRARY_PATH). Loaded once; later calls return the same result.
const CudaModule& cuda_module();

}  // namespace ingot::runtime
