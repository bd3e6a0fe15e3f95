// The CUDA backend: device memory through a caching cudaMalloc allocator,
// one compute stream, cuBLAS for dense GEMMs, kernels for every other op.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/backend.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

// True when the CUDA runtime sees at least one device.
bool available();
// The backend's pieces of the CUDA device plug-in (runtime/cuda_plugin.h
// registers them): the op vocabulary, device memory from the caching
// allocator, and copies that touch device memory.
Backend* backend();
std::shared_ptr<Storage> allocate(size_t bytes);
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
std::shared_ptr<Storage> allocate_pinned_host(size_t bytes);
void gather_to_host(void* host_dst, const void* const* src, const size_t* bytes, size_t n);
void strided_copy(const Tensor& src, Tensor& dst);  // kernels.cu
// Waits for all queued device work (benchmarks, tests).
void synchronize();

struct DeviceMemoryStats {
  size_t live_bytes = 0, cached_bytes = 0, peak_bytes = 0;
};
DeviceMemoryStats memory_stats();
// Total memory of device 0.
int64_t total_memory_bytes();

}  // namespace ingot::cuda
