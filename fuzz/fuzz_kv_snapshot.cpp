// KV snapshot files: arbitrary bytes as a snapshot (through a memfd, since
// the reader takes a path), indexed and restored into a matching pool, plain
// and KV8. A refused file must leave the pool untouched.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kv_snapshot_layout.h"
#include "runtime/runtime.h"
#include "util/error.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ingot::runtime::init_backends();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto paged = ingot::fuzz::snapshot_pool("paged");
  static auto kv8 = ingot::fuzz::snapshot_pool("kv8");
  int fd = ::memfd_create("snapshot", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  for (size_t at = 0; at < size;) {
    ssize_t n = ::write(fd, data + at, size - at);
    if (n <= 0) __builtin_trap();
    at += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    ingot::kv::read_snapshot_info(path);
  } catch (const ingot::Error&) {
  }
  for (auto* pool : {paged.get(), kv8.get()}) {
    const int64_t used = pool->used_blocks();
    try {
      std::vector<int32_t> tokens;
      auto seq = ingot::kv::restore_snapshot(path, *pool, ingot::fuzz::snapshot_key(*pool), &tokens);
      // A restored prefix decodes on: fetch every layer.
      for (int l = 0; l < seq->num_layers(); ++l) {
        int64_t first = 0;
        seq->layer(l).fetch(&first);
      }
    } catch (const ingot::Error&) {
      if (pool->used_blocks() != used) __builtin_trap();
    }
  }
  ::close(fd);
  return 0;
}
