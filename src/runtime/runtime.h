// Process start-up: installs every backend this build has.
#pragma once

namespace ingot::runtime {

// Idempotent. CUDA is installed only when built in and a device is present.
void init_backends();
// True when a CUDA device is usable in this process.
bool cuda_available();

}  // namespace ingot::runtime
