// runtime::register_device: one plug-in reaches every registry a device
// needs (ops, tensor memory and copies, the row sampler, the KV kernels).
// A plug-in stands in for Device::CUDA here with host functions, so the test
// runs without a GPU (its own process: nothing else sees the stand-in).
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "runtime/device_plugin.h"
#include "util/error.h"

namespace ingot::runtime {
namespace {

int g_allocs = 0, g_copies = 0, g_samples = 0;

std::shared_ptr<Storage> counting_alloc(size_t bytes) {
  ++g_allocs;
  return Storage::host(bytes);
}

void counting_copy(void* dst, Device, const void* src, Device, size_t bytes) {
  ++g_copies;
  std::memcpy(dst, src, bytes);
}

SampledRows counting_sampler(const Tensor&, const SampleRowsPlan&) {
  ++g_samples;
  return {};
}

TEST(DevicePlugin, TheCpuIsRegisteredAtStartUp) {
  ASSERT_TRUE(has_backend(Device::CPU));
  EXPECT_EQ(&backend(Device::CPU), cpu::backend());
  EXPECT_NE(kv::paged_kernels(Device::CPU), nullptr);  // the KV store's own CPU defaults
}

TEST(DevicePlugin, EveryHookReachesItsRegistry) {
  const kv::PagedKernels* cpu_paged = kv::paged_kernels(Device::CPU);
  ASSERT_NE(cpu_paged, nullptr);
  DevicePlugin p;
  p.device = Device::CUDA;
  p.backend = cpu::backend();
  p.allocate = &counting_alloc;
  p.copy = &counting_copy;
  p.sample_rows = &counting_sampler;
  p.paged = *cpu_paged;
  register_device(p);

  EXPECT_EQ(&backend(Device::CUDA), cpu::backend());
  const int allocs = g_allocs;
  std::shared_ptr<Storage> s = allocate_storage(64, Device::CUDA);
  EXPECT_EQ(g_allocs, allocs + 1);
  const int copies = g_copies;
  const char src[4] = {1, 2, 3, 4};
  char dst[4] = {};
  device_copy(dst, Device::CUDA, src, Device::CPU, sizeof src);
  EXPECT_EQ(g_copies, copies + 1);
  EXPECT_EQ(std::memcmp(dst, src, sizeof src), 0);
  EXPECT_EQ(row_sampler(Device::CUDA), &counting_sampler);
  ASSERT_NE(kv::paged_kernels(Device::CUDA), nullptr);
  EXPECT_EQ(kv::paged_kernels(Device::CUDA)->attend, cpu_paged->attend);
}

TEST(DevicePlugin, UnsetHooksKeepTheDefaults) {
  DevicePlugin p;  // the CPU again, with its backend only
  p.backend = cpu::backend();
  register_device(p);
  EXPECT_NE(kv::paged_kernels(Device::CPU), nullptr);
  EXPECT_EQ(row_sampler(Device::CPU), nullptr);  // the host twin samples
}

TEST(DevicePlugin, APlugInWithoutABackendIsRefused) {
  DevicePlugin p;
  p.device = Device::CUDA;
  p.allocate = &counting_alloc;
  try {
    register_device(p);
    FAIL() << "registered a device without a backend";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
  }
}

}  // namespace
}  // namespace ingot::runtime
