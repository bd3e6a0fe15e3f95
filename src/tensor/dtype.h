// Element types. Scalar types have block_elems == 1; packed quantized types
// store `block_elems` logical values in `block_bytes` bytes (GGUF blocks).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ingot {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I32,
  I64,
  U8,
  I8,
  U32,
  // Packed block formats (GGUF). Always row-major and contiguous per row.
  Q8_0,
  Q4_0,
  Q4_1,
  Q4_K,
  Q5_K,
  Q6_K,
  // Q8_0 / Q4_0 / Q4_1 with rows interleaved in groups of 8 for the CPU's
  // integer dot kernels (quant/interleave.h): made at load, never read from a
  // file. Same bytes per row; a group of 8 rows spans the bytes those rows would.
  Q8_0x8,
  Q4_0x8,
  Q4_1x8,
};

struct DTypeInfo {
  const char* name;
  int block_elems;  // logical values per block (1 for scalar types)
  int block_bytes;  // bytes per block
  bool is_float;
  bool is_quantized;
  int row_group = 1;  // rows stored interleaved in groups of this many
};

const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_quantized(DType t) { return dtype_info(t).is_quantized; }
// Bytes of one scalar element; only valid for non-quantized types.
size_t dtype_size(DType t);
// Bytes that `n` consecutive values take (n must be a multiple of block_elems).
size_t dtype_bytes(DType t, int64_t n);
// Parses "float32" / "bfloat16" / "f32" / ...; throws InvalidArgument.
DType parse_dtype(std::string_view s);

enum class Device : uint8_t { CPU, CUDA };
const char* device_name(Device d);
Device parse_device(std::string_view s);

}  // namespace ingot
