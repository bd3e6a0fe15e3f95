#include "backend/cuda/runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/tuning.h"
#include "tensor/bucket_cache.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

void fail_cuda(const char* what, cudaError_t e, const char* file, int line) {
  fail(e == cudaErrorMemoryAllocation ? ErrorKind::ResourceExhausted : ErrorKind::Internal, "CUDA error ",
       cudaGetErrorString(e), " in ", what, " (", file, ":", line, ")");
}

void fail_cublas(const char* what, cublasStatus_t s, const char* file, int line) {
  fail(ErrorKind::Internal, "cuBLAS error ", static_cast<int>(s), " in ", what, " (", file, ":", line, ")");
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t hh;
    CUBLAS_OK(cublasCreate(&hh));
    CUBLAS_OK(cublasSetStream(hh, stream()));
    // Parity runs need exact float32 GEMMs: no TF32.
    CUBLAS_OK(cublasSetMathMode(hh, CUBLAS_DEFAULT_MATH));
    return hh;
  }();
  return h;
}

namespace {

// The error of this thread's last failed device_alloc, for the message.
thread_local cudaError_t g_malloc_error = cudaSuccess;

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    g_malloc_error = e;
    return nullptr;
  }
  return p;
}
void device_free(void* p) { cudaFree(p); }

// Caching allocator: freed blocks go back to a size-bucketed free list and
// are reused by later allocations. All work runs on one stream, so a block
// freed on the host may be handed out again while earlier kernels that used
// it are still queued: stream order makes that safe.
class DevicePool {
 public:
  void* acquire(size_t bytes, size_t* rounded) {
    if (void* p = cache_.acquire(bytes, rounded)) return p;
    // Give cached blocks back and try once more before failing.
    release_cached();
    if (void* p = cache_.acquire(bytes, rounded)) return p;
    fail_cuda("cudaMalloc", g_malloc_error, __FILE__, __LINE__);
  }
  void release(void* p, size_t r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (capturing_) {
        // A captured graph keeps using this address at every replay: it stays
        // live and out of the free lists until the graph is destroyed.
        held_.emplace_back(p, r);
        return;
      }
    }
    cache_.release(p, r);
  }
  void begin_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    capturing_ = true;
  }
  std::vector<std::pair<void*, size_t>> end_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    capturing_ = false;
    return std::exchange(held_, {});
  }
  void give_back(const std::vector<std::pair<void*, size_t>>& blocks) {
    for (auto& [p, r] : blocks) release(p, r);
  }
  bool capturing() {
    std::lock_guard<std::mutex> lock(mu_);
    return capturing_;
  }
  DeviceMemoryStats stats() {
    const BucketStats s = cache_.stats();
    return {s.live_bytes, s.cached_bytes, s.peak_bytes};
  }

 private:
  void release_cached() {
    if (capturing()) return;  // no synchronisation inside a capture
    cudaStreamSynchronize(stream());
    cache_.trim();
  }
  BucketCache cache_{512, SIZE_MAX, &device_alloc, &device_free};
  std::mutex mu_;  // capturing_ and held_
  std::vector<std::pair<void*, size_t>> held_;
  bool capturing_ = false;
};

DevicePool& pool() {
  static DevicePool* p = new DevicePool();
  return *p;
}

class CudaStorage final : public Storage {
 public:
  explicit CudaStorage(size_t bytes) : Storage(nullptr, bytes, Device::CUDA, false) {
    data_ = pool().acquire(bytes, &rounded_);
  }
  ~CudaStorage() override { pool().release(data_, rounded_); }

 private:
  size_t rounded_ = 0;
};

// Small host-to-device copies (token ids, positions, row tables) go through
// a ring of pinned slots: the host bytes are copied into a slot and the
// upload is queued without waiting, so a decode step never blocks on its
// inputs. A slot is reused only after the event of its last upload fired.
class PinnedStaging {
 public:
  static constexpr size_t kSlotBytes = 64 * 1024;
  static constexpr int kSlots = 32;

  bool upload(void* dst, const void* src, size_t bytes) {
    if (bytes > kSlotBytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (!base_) {
      CUDA_OK(cudaMallocHost(&base_, kSlotBytes * kSlots));
      for (auto& e : events_) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const int i = next_;
    next_ = (next_ + 1) % kSlots;
    CUDA_OK(cudaEventSynchronize(events_[i]));  // returns at once unless the ring wrapped within one step
    uint8_t* slot = static_cast<uint8_t*>(base_) + kSlotBytes * static_cast<size_t>(i);
    std::memcpy(slot, src, bytes);
    CUDA_OK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, stream()));
    CUDA_OK(cudaEventRecord(events_[i], stream()));
    return true;
  }

 private:
  std::mutex mu_;
  void* base_ = nullptr;
  cudaEvent_t events_[kSlots] = {};
  int next_ = 0;
};

PinnedStaging& staging() {
  static PinnedStaging* s = new PinnedStaging();
  return *s;
}

}  // namespace

std::shared_ptr<Storage> allocate(size_t bytes) { return std::make_shared<CudaStorage>(bytes); }

void copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) {
  if (bytes == 0) return;
  // A captured step must read its inputs from device memory: a host copy
  // would replay stale bytes (uploads) or need a wait (downloads).
  if ((dd != Device::CUDA || sd != Device::CUDA) && pool().capturing())
    fail(ErrorKind::Internal, "host/device copy of ", bytes, " bytes inside a captured CUDA step");
  if (dd == Device::CUDA && sd != Device::CUDA && staging().upload(dst, src, bytes)) return;
  cudaMemcpyKind kind = dd == Device::CUDA ? (sd == Device::CUDA ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                           : cudaMemcpyDeviceToHost;
  CUDA_OK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
  // Host memory must be valid (and filled) when the call returns.
  if (kind != cudaMemcpyDeviceToDevice) CUDA_OK(cudaStreamSynchronize(stream()));
}

std::shared_ptr<Storage> allocate_pinned_host(size_t bytes) {
  void* p = nullptr;
  CUDA_OK(cudaMallocHost(&p, std::max<size_t>(bytes, 1)));
  return Storage::adopt(p, bytes, Device::CPU, [](void* q) { cudaFreeHost(q); });
}

void gather_to_host(void* host_dst, const void* const* src, const size_t* bytes, size_t n) {
  // One stream per calling thread, never the engine's: the engine may be
  // replaying or capturing a step meanwhile (captures are relaxed, so another
  // thread's copies are allowed). Kept for the thread's life, like stream().
  thread_local cudaStream_t own = [] {
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  auto* d = static_cast<uint8_t*>(host_dst);
  for (size_t i = 0; i < n; ++i) {
    CUDA_OK(cudaMemcpyAsync(d, src[i], bytes[i], cudaMemcpyDeviceToHost, own));
    d += bytes[i];
  }
  CUDA_OK(cudaStreamSynchronize(own));
}

namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(cudaGraphExec_t exec, std::vector<std::pair<void*, size_t>> held)
      : exec_(exec), held_(std::move(held)) {}
  ~CudaStepGraph() override {
    // Queued replays must finish before their blocks are handed out again.
    cudaStreamSynchronize(stream());
    cudaGraphExecDestroy(exec_);
    pool().give_back(held_);
  }
  void replay() override { CUDA_OK(cudaGraphLaunch(exec_, stream())); }

 private:
  cudaGraphExec_t exec_;
  std::vector<std::pair<void*, size_t>> held_;
};

}  // namespace

std::unique_ptr<StepGraph> capture(const std::function<void()>& step) {
  pool().begin_capture();
  cudaError_t began = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed);
  if (began != cudaSuccess) {
    pool().give_back(pool().end_capture());
    fail_cuda("cudaStreamBeginCapture", began, __FILE__, __LINE__);
  }
  cudaGraph_t graph = nullptr;
  try {
    step();
  } catch (...) {
    cudaStreamEndCapture(stream(), &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    pool().give_back(pool().end_capture());
    throw;
  }
  cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
  auto held = pool().end_capture();
  if (ended != cudaSuccess) {
    pool().give_back(held);
    fail_cuda("cudaStreamEndCapture", ended, __FILE__, __LINE__);
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    pool().give_back(held);
    fail_cuda("cudaGraphInstantiate", inst, __FILE__, __LINE__);
  }
  return std::make_unique<CudaStepGraph>(exec, std::move(held));
}

DeviceMemoryStats memory_stats() { return pool().stats(); }

int64_t total_memory_bytes() {
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(total_b);
}

void synchronize() { CUDA_OK(cudaStreamSynchronize(stream())); }

bool available() {
  static const bool ok = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return ok;
}

}  // namespace ingot::cuda
