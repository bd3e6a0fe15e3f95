// Registers the CUDA kernels of kv/batched_rows.h (one K/V write and one
// attention launch per layer for a decode step's contiguous stores). Built
// with the CUDA backend only, installed beside install_paged_cuda().
#pragma once

namespace ingot::kv {

void install_rows_cuda();

}  // namespace ingot::kv
