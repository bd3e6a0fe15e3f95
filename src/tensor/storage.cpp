#include "tensor/storage.h"

#include <cstdlib>

#include "tensor/bucket_cache.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace ingot {

namespace {

void* host_alloc(size_t bytes) { return std::aligned_alloc(64, bytes); }
void host_free(void* p) { std::free(p); }

// Freed host blocks are cached by size: decode steps allocate the same
// activation sizes every token, and reusing them avoids page-faulting fresh
// mmap'd memory each time. At most 4 GiB stay cached.
BucketCache& host_pool() {
  // Never destroyed: storages may outlive statics.
  static BucketCache* pool = new BucketCache(64, size_t(4) << 30, &host_alloc, &host_free);
  return *pool;
}

class HostStorage final : public Storage {
 public:
  explicit HostStorage(size_t bytes) : Storage(nullptr, bytes, Device::CPU, false) {
    data_ = host_pool().acquire(bytes, &rounded_);
    if (!data_) fail(ErrorKind::ResourceExhausted, "out of host memory allocating ", bytes, " bytes");
  }
  ~HostStorage() override { host_pool().release(data_, rounded_); }

 private:
  size_t rounded_ = 0;
};

class MappedStorage final : public Storage {
 public:
  MappedStorage(std::shared_ptr<MappedFile> f, size_t off, size_t bytes)
      : Storage(const_cast<uint8_t*>(f->data()) + off, bytes, Device::CPU, true),
        file_(std::move(f)) {}

 private:
  std::shared_ptr<MappedFile> file_;
};

class AdoptedStorage final : public Storage {
 public:
  AdoptedStorage(void* p, size_t bytes, Device d, std::function<void(void*)> rel)
      : Storage(p, bytes, d, false), release_(std::move(rel)) {}
  ~AdoptedStorage() override {
    if (release_) release_(data_);
  }

 private:
  std::function<void(void*)> release_;
};

DeviceAllocator g_device_alloc[2] = {nullptr, nullptr};

}  // namespace

std::shared_ptr<Storage> Storage::host(size_t bytes) {
  return std::make_shared<HostStorage>(bytes);
}

std::shared_ptr<Storage> Storage::mapped(std::shared_ptr<MappedFile> file, size_t offset,
                                         size_t bytes) {
  INGOT_CHECK(offset + bytes <= file->size());
  return std::make_shared<MappedStorage>(std::move(file), offset, bytes);
}

std::shared_ptr<Storage> Storage::adopt(void* data, size_t bytes, Device device,
                                        std::function<void(void*)> release) {
  return std::make_shared<AdoptedStorage>(data, bytes, device, std::move(release));
}

void register_device_allocator(Device d, DeviceAllocator alloc) {
  g_device_alloc[static_cast<int>(d)] = alloc;
}

std::shared_ptr<Storage> allocate_storage(size_t bytes, Device d) {
  if (d == Device::CPU) return Storage::host(bytes);
  DeviceAllocator a = g_device_alloc[static_cast<int>(d)];
  if (!a) fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available in this build");
  return a(bytes);
}

namespace {
PinnedHostAllocator g_pinned_alloc = nullptr;
}  // namespace

void register_pinned_host_allocator(PinnedHostAllocator alloc) { g_pinned_alloc = alloc; }

std::shared_ptr<Storage> allocate_pinned_host(size_t bytes) {
  return g_pinned_alloc ? g_pinned_alloc(bytes) : Storage::host(bytes);
}

HostMemoryStats host_memory_stats() {
  const BucketStats s = host_pool().stats();
  return {s.live_bytes, s.cached_bytes, s.peak_bytes};
}
void host_memory_trim() { host_pool().trim(); }

}  // namespace ingot
