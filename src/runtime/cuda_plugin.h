// The CUDA device plug-in: the backend's ops, memory and samplers
// (backend/cuda) with the CUDA side of the KV stores (kv/*_cuda.cpp). Built
// into ingot_runtime where CUDA is linked in, and into libingot_cuda.so.
#pragma once
#include "runtime/device_plugin.h"

namespace ingot::runtime {

// Only meaningful where cuda::available().
DevicePlugin cuda_plugin();

}  // namespace ingot::runtime
