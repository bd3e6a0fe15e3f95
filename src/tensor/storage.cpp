#include "tensor/storage.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "util/error.h"
#include "util/mapped_file.h"

namespace ingot {

namespace {

// Size-bucketed cache of freed host blocks: decode steps allocate the same
// activation sizes every token, and reusing them avoids page-faulting fresh
// mmap'd memory each time.
class HostPool {
 public:
  void* acquire(size_t bytes, size_t* rounded) {
    size_t r = round_up(bytes);
    *rounded = r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(r);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= r;
        live_ += r;
        if (live_ > peak_) peak_ = live_;
        return p;
      }
      live_ += r;
      if (live_ > peak_) peak_ = live_;
    }
    void* p = std::aligned_alloc(64, r);
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      live_ -= r;
      fail(ErrorKind::ResourceExhausted, "out of host memory allocating ", bytes, " bytes");
    }
    return p;
  }

  void release(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    live_ -= rounded;
    if (cached_ + rounded > kMaxCached) {
      std::free(p);
      return;
    }
    free_.emplace(rounded, p);
    cached_ += rounded;
  }

  void trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [sz, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  HostMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {live_, cached_, peak_};
  }

 private:
  static size_t round_up(size_t b) {
    if (b < 64) return 64;
    // Round to 1/8 of the next power of two: bounded waste, good reuse.
    size_t p = 64;
    while (p < b) p <<= 1;
    size_t step = p >= 512 ? p / 8 : 64;
    return (b + step - 1) / step * step;
  }
  static constexpr size_t kMaxCached = size_t(4) << 30;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t live_ = 0, cached_ = 0, peak_ = 0;
};

HostPool& host_pool() {
  static HostPool* pool = new HostPool();  // never destroyed: storages may outlive statics
  return *pool;
}

class HostStorage final : public Storage {
 public:
  explicit HostStorage(size_t bytes) : Storage(nullptr, bytes, Device::CPU, false) {
    data_ = host_pool().acquire(bytes, &rounded_);
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

HostMemoryStats host_memory_stats() { return host_pool().stats(); }
void host_memory_trim() { host_pool().trim(); }

}  // namespace ingot
