// Process start-up: installs every backend this build has.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ingot::runtime {

// Idempotent. CUDA is installed here only when linked in (ingot_runtime) and a
// device is present; ingot_runtime_lazy leaves it to enable_device.
void init_backends();
// Makes a device usable before a model is placed on it. For CUDA in the ingot
// CLI this opens the CUDA backend module (the first time); a no-op for the CPU
// and where the backend is linked in (installed by init_backends).
void enable_device(Device d);
// True when a CUDA device is usable in this process.
bool cuda_available();
// Total memory of a device in bytes (host RAM for the CPU).
int64_t device_memory_bytes(Device d);

}  // namespace ingot::runtime
