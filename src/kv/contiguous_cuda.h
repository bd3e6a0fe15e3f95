// The CUDA kernels of kv/batched_rows.h (one K/V write and one attention
// launch per layer for a decode step's contiguous stores), for the CUDA
// device plug-in (runtime/cuda_plugin.h). Built with the CUDA backend only.
#pragma once
#include "kv/batched_rows.h"

namespace ingot::kv {

RowsStepFn rows_cuda_kernel();

}  // namespace ingot::kv
