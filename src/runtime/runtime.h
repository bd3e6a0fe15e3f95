// Process start-up: installs every backend this build has.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ingot::runtime {

// Idempotent. CUDA is installed only when built in and a device is present.
void init_backends();
// True when a CUDA device is usable in this process.
bool cuda_available();
// Total memory of a device in bytes (host RAM for the CPU).
int64_t device_memory_bytes(Device d);

}  // namespace ingot::runtime
