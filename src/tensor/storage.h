// Ref-counted byte buffers behind tensors: host heap (64-byte aligned),
// read-only file maps (weights), and device memory (provided by a backend).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/dtype.h"

namespace ingot {

class MappedFile;

class Storage {
 public:
  virtual ~Storage() = default;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }

  // Host memory, 64-byte aligned, uninitialised; recycled through a size-bucketed cache.
  static std::shared_ptr<Storage> host(size_t bytes);
  // A read-only window [offset, offset+bytes) of a mapped file; keeps the map alive.
  static std::shared_ptr<Storage> mapped(std::shared_ptr<MappedFile> file, size_t offset,
                                         size_t bytes);
  // Adopts memory owned elsewhere; `release` runs when the last reference goes.
  static std::shared_ptr<Storage> adopt(void* data, size_t bytes, Device device,
                                        std::function<void(void*)> release);

 protected:
  Storage(void* data, size_t bytes, Device device, bool read_only)
      : data_(data), bytes_(bytes), device_(device), read_only_(read_only) {}
  void* data_;
  size_t bytes_;
  Device device_;
  bool read_only_;
};

// Device allocation hook: a backend (CUDA) registers its allocator here so that
// tensor/ can create device tensors without depending on the backend.
using DeviceAllocator = std::shared_ptr<Storage> (*)(size_t bytes);
void register_device_allocator(Device d, DeviceAllocator alloc);
std::shared_ptr<Storage> allocate_storage(size_t bytes, Device d);

// Page-locked host memory for bulk transfers to and from a device (snapshot
// staging). A backend registers its allocator; without one this is ordinary
// host memory.
using PinnedHostAllocator = std::shared_ptr<Storage> (*)(size_t bytes);
void register_pinned_host_allocator(PinnedHostAllocator alloc);
std::shared_ptr<Storage> allocate_pinned_host(size_t bytes);

// Bytes currently held by the host allocator's cache and live allocations.
struct HostMemoryStats {
  size_t live_bytes;
  size_t cached_bytes;
  size_t peak_live_bytes;
};
HostMemoryStats host_memory_stats();
void host_memory_trim();  // returns cached blocks to the OS

}  // namespace ingot
