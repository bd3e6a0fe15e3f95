#include "runtime/device_plugin.h"

#include "util/error.h"

namespace ingot::runtime {

void register_device(const DevicePlugin& p) {
  INGOT_CHECK(p.backend, "a device plug-in needs a backend");
  register_backend(p.device, p.backend);
  if (p.allocate) register_device_allocator(p.device, p.allocate);
  if (p.copy) register_device_copy(p.copy);
  if (p.strided_copy) register_device_strided_copy(p.strided_copy);
  if (p.pinned_host) register_pinned_host_allocator(p.pinned_host);
  if (p.gather) register_device_gather(p.gather);
  if (p.sample_rows) register_row_sampler(p.device, p.sample_rows);
  if (p.paged.attend) kv::register_paged_kernels(p.device, p.paged);
  if (p.rows) kv::register_rows_kernels(p.device, p.rows);
}

}  // namespace ingot::runtime
