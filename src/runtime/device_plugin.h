// One device plug-in: everything a backend gives the rest of ingot for its
// device, filled by the backend's side and registered in one call. The
// registries it fills stay where their users look them up (tensor/, ops/,
// kv/), so those modules never learn which backends exist.
#pragma once
#include "kv/batched_rows.h"
#include "kv/paged_attention.h"
#include "ops/backend.h"
#include "ops/sample_rows.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"

namespace ingot::runtime {

struct DevicePlugin {
  Device device = Device::CPU;
  Backend* backend = nullptr;                       // the op vocabulary (required)
  DeviceAllocator allocate = nullptr;               // device memory; the host needs none
  DeviceCopyFn copy = nullptr;                      // copies that touch device memory
  DeviceStridedCopyFn strided_copy = nullptr;       // strided copies inside the device
  PinnedHostAllocator pinned_host = nullptr;        // page-locked host staging
  DeviceGatherFn gather = nullptr;                  // downloads beside the engine's stream
  RowSamplerFn sample_rows = nullptr;               // else the host twin samples
  kv::PagedKernels paged;                           // paged-pool kernels; unset: none
  kv::RowsStepFn rows = nullptr;                    // batched decode rows; else per sequence
};

// Installs every hook the plug-in sets; hooks it leaves unset keep their
// registries' defaults. Registering the same device again replaces them.
void register_device(const DevicePlugin& p);

}  // namespace ingot::runtime
