// CRC-32C (Castagnoli) for snapshot checksums: SSE4.2 when the CPU has it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ingot::kv {

// Continues `crc` (start with 0) over n bytes.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

}  // namespace ingot::kv
