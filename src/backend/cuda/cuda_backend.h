// The CUDA backend: device memory through a caching cudaMalloc allocator,
// one compute stream, cuBLAS for dense GEMMs, kernels for every other op.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ingot::cuda {

// True when the CUDA runtime sees at least one device.
bool available();
// Installs the CUDA backend, allocator and copy hooks if a device is present.
void try_install();
// Waits for all queued device work (benchmarks, tests).
void synchronize();

struct DeviceMemoryStats {
  size_t live_bytes = 0, cached_bytes = 0, peak_bytes = 0;
};
DeviceMemoryStats memory_stats();
// Total memory of device 0.
int64_t total_memory_bytes();

}  // namespace ingot::cuda
