// Programmatic dependent launch (Hopper): a kernel launched with
// launch_overlapped() may be scheduled while the kernel before it on the
// stream is still running, once every block of that kernel has called
// let_next_kernel_start(); it calls wait_for_previous_kernel() before it
// reads or writes any activation, after which every write of the previous
// kernel is visible. What overlaps is the launch and block scheduling (a
// prefetch of the weights into L2 before the wait measured slower on the
// H200: bench/RESULTS.md). A kernel launched normally waits for the one
// before it as usual, and both calls are no-ops where no such launch is
// involved.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/runtime.h"

namespace ingot::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void let_next_kernel_start() { asm volatile("griddepcontrol.launch_dependents;" :::); }

// kernel<<<grid, block, smem, stream()>>>(args...), allowed to overlap the previous kernel.
template <typename... Params, typename... Args>
void launch_overlapped_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CUDA_OK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
}

// kernel<<<grid, block, 0, stream()>>>(args...), allowed to overlap the previous kernel.
template <typename... Params, typename... Args>
void launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
  launch_overlapped_smem(kernel, grid, block, 0, static_cast<Args&&>(args)...);
}

}  // namespace ingot::cuda
