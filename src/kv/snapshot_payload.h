// The payload half of a snapshot file (kv/snapshot.h): streamed writes
// (host memory straight from where it lives, device memory through pinned
// staging), the chunked payload hash, and exact reads.
#pragma once
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <xxhash.h>

#include "kv/snapshot.h"
#include "tensor/storage.h"

namespace ingot::kv {

constexpr size_t kPage = 4096;
constexpr size_t kHashChunk = 8u << 20;  // payload bytes per chunk hash

inline size_t page_up(size_t v) { return (v + kPage - 1) / kPage * kPage; }

// Writes every iovec at file offset `at` (advanced), resuming short writes.
void write_all(int fd, std::vector<iovec>& iov, uint64_t& at, const SnapshotWriteHooks& hooks, const std::string& path);
// Reads exactly `n` bytes at `at`; a short file is a BadFormat error.
void read_exact(int fd, void* dst, size_t n, uint64_t at, const std::string& path);

// The payload hash: XXH3-64 of each kHashChunk bytes, then XXH3-64 over those
// hashes, so a restore can check the chunks on every core.
class ChunkHasher {
 public:
  ChunkHasher() { XXH3_64bits_reset(st_.get()); }
  void update(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n) {
      const size_t take = std::min(n, kHashChunk - in_chunk_);
      XXH3_64bits_update(st_.get(), b, take);
      b += take;
      n -= take;
      in_chunk_ += take;
      if (in_chunk_ == kHashChunk) close_chunk();
    }
  }
  uint64_t digest() {
    if (in_chunk_) close_chunk();
    return XXH3_64bits(chunks_.data(), chunks_.size() * sizeof(uint64_t));
  }

 private:
  void close_chunk() {
    chunks_.push_back(XXH3_64bits_digest(st_.get()));
    XXH3_64bits_reset(st_.get());
    in_chunk_ = 0;
  }
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st_{XXH3_createState(), &XXH3_freeState};
  std::vector<uint64_t> chunks_;
  size_t in_chunk_ = 0;
};

// ChunkHasher's digest of `n` bytes in memory, its chunks hashed in parallel
// on the compute pool.
uint64_t payload_digest(const void* mem, size_t n);

// Streams the payload to the file at `at`, hashing it on the way. Host
// memory is written straight from where it lives (pwritev); device memory is
// gathered into a pinned staging buffer first, off the engine's stream.
class PayloadWriter {
 public:
  PayloadWriter(int fd, uint64_t at, Device device, const SnapshotWriteHooks& hooks, const std::string& path);
  // `n` bytes at `p`, in memory of the pool's device (`on_device`) or the host.
  void add(const void* p, size_t n, bool on_device);
  void pad_page();  // zeros up to the next page boundary
  void flush();     // writes (and hashes) everything added so far
  uint64_t bytes() const { return payload_; }
  uint64_t end() const { return at_; }  // the file offset reached
  uint64_t digest() { return hasher_.digest(); }

 private:
  int fd_;
  uint64_t at_;
  Device device_;
  const SnapshotWriteHooks& hooks_;
  const std::string& path_;
  std::shared_ptr<Storage> stage_;  // pinned, device pools only
  size_t staged_ = 0;
  std::vector<const void*> gather_src_;
  std::vector<size_t> gather_len_;
  std::vector<iovec> iov_;
  ChunkHasher hasher_;
  uint64_t payload_ = 0;
};

}  // namespace ingot::kv
