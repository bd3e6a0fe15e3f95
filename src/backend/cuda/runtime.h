// Shared CUDA runtime state for the backend's translation units.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "ops/backend.h"

#include "util/error.h"

namespace ingot::cuda {

cudaStream_t stream();
cublasHandle_t cublas();
// Captures the work `step` queues on the stream into a replayable graph.
// Device blocks freed during the capture stay reserved for the graph.
std::unique_ptr<StepGraph> capture(const std::function<void()>& step);

[[noreturn]] void fail_cuda(const char* what, cudaError_t e, const char* file, int line);
[[noreturn]] void fail_cublas(const char* what, cublasStatus_t s, const char* file, int line);

}  // namespace ingot::cuda

#define CUDA_OK(expr)                                                                    \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) ::ingot::cuda::fail_cuda(#expr, e_, __FILE__, __LINE__);     \
  } while (0)

#define CUBLAS_OK(expr)                                                                  \
  do {                                                                                  \
    cublasStatus_t s_ = (expr);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::ingot::cuda::fail_cublas(#expr, s_, __FILE__, __LINE__); \
  } while (0)

#define CUDA_LAUNCH_OK() CUDA_OK(cudaGetLastError())
