// Registers the CUDA kernels of the paged stores (kv/paged_attention.h) for
// Device::CUDA. Built with the CUDA backend only; runtime::init_backends()
// calls it once a device is found.
#pragma once

namespace ingot::kv {

void install_paged_cuda();

}  // namespace ingot::kv
