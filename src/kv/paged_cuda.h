// The CUDA kernels of the paged stores (kv/paged_attention.h), for the CUDA
// device plug-in (runtime/cuda_plugin.h). Built with the CUDA backend only.
#pragma once
#include "kv/paged_attention.h"

namespace ingot::kv {

PagedKernels paged_cuda_kernels();

}  // namespace ingot::kv
