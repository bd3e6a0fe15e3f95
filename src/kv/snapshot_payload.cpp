#include "kv/snapshot_payload.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::kv {

namespace {
constexpr size_t kMaxIov = 64;            // iovecs per pwritev batch
constexpr size_t kStageBytes = 16u << 20;  // pinned staging for device pools
}  // namespace

void write_all(int fd, std::vector<iovec>& iov, uint64_t& at, const SnapshotWriteHooks& hooks,
               const std::string& path) {
  for (size_t i = 0; i < iov.size();) {
    const int n = static_cast<int>(std::min<size_t>(kMaxIov, iov.size() - i));
    ssize_t w = ::pwritev(fd, iov.data() + i, n, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::Io, "snapshot write to ", path, ": ", std::strerror(errno));
    }
    if (w == 0) fail(ErrorKind::Io, "snapshot write to ", path, ": no progress (device full?)");
    at += static_cast<uint64_t>(w);
    // Consume what was written (short writes resume mid-vector).
    auto left = static_cast<size_t>(w);
    while (left && i < iov.size()) {
      if (left >= iov[i].iov_len) {
        left -= iov[i].iov_len;
        ++i;
      } else {
        iov[i].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + left;
        iov[i].iov_len -= left;
        left = 0;
      }
    }
    if (hooks.progress) hooks.progress(at);
  }
}

void read_exact(int fd, void* dst, size_t n, uint64_t at, const std::string& path) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail(ErrorKind::BadFormat, "snapshot ", path, " is truncated");
    p += r;
    n -= static_cast<size_t>(r);
    at += static_cast<uint64_t>(r);
  }
}

// ChunkHasher's digest of `n` bytes in memory, its chunks hashed in parallel.
uint64_t payload_digest(const void* mem, size_t n) {
  const size_t chunks = (n + kHashChunk - 1) / kHashChunk;
  std::vector<uint64_t> h(chunks);
  cpu::pool().run(static_cast<int64_t>(chunks), [&](int64_t c) {
    const size_t at = static_cast<size_t>(c) * kHashChunk;
    h[static_cast<size_t>(c)] = XXH3_64bits(static_cast<const uint8_t*>(mem) + at, std::min(kHashChunk, n - at));
  });
  return XXH3_64bits(h.data(), h.size() * sizeof(uint64_t));
}

PayloadWriter::PayloadWriter(int fd, uint64_t at, Device device, const SnapshotWriteHooks& hooks,
                             const std::string& path)
    : fd_(fd), at_(at), device_(device), hooks_(hooks), path_(path) {
  if (device_ != Device::CPU) stage_ = allocate_pinned_host(kStageBytes);
}

void PayloadWriter::add(const void* p, size_t n, bool on_device) {
  payload_ += n;
  if (!on_device || device_ == Device::CPU) {
    if (n) iov_.push_back({const_cast<void*>(p), n});
    if (iov_.size() >= kMaxIov) flush();
    return;
  }
  const auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    if (staged_ == kStageBytes || iov_.size() >= kMaxIov) flush();
    const size_t take = std::min(n, kStageBytes - staged_);
    gather_src_.push_back(b);
    gather_len_.push_back(take);
    iov_.push_back({static_cast<uint8_t*>(stage_->data()) + staged_, take});
    staged_ += take;
    b += take;
    n -= take;
  }
}

void PayloadWriter::pad_page() {
  static const std::vector<uint8_t> zeros(kPage, 0);
  add(zeros.data(), page_up(payload_) - payload_, false);
}

void PayloadWriter::flush() {
  if (!gather_src_.empty())
    device_gather_to_host(stage_->data(), gather_src_.data(), gather_len_.data(), gather_src_.size(), device_);
  for (const iovec& v : iov_) hasher_.update(v.iov_base, v.iov_len);
  write_all(fd_, iov_, at_, hooks_, path_);
  iov_.clear();
  gather_src_.clear();
  gather_len_.clear();
  staged_ = 0;
}

}  // namespace ingot::kv
