#include "tensor/dtype.h"

#include "util/error.h"

namespace ingot {

const DTypeInfo& dtype_info(DType t) {
  static const DTypeInfo table[] = {
      {"float32", 1, 4, true, false},   {"float16", 1, 2, true, false},
      {"bfloat16", 1, 2, true, false},  {"int32", 1, 4, false, false},
      {"int64", 1, 8, false, false},    {"uint8", 1, 1, false, false},
      {"int8", 1, 1, false, false},     {"uint32", 1, 4, false, false},
      {"q8_0", 32, 34, false, true},    {"q4_0", 32, 18, false, true},
      {"q4_1", 32, 20, false, true},    {"q4_k", 256, 144, false, true},
      {"q5_k", 256, 176, false, true},  {"q6_k", 256, 210, false, true},
      {"q8_0x8", 32, 34, false, true, 8}, {"q4_0x8", 32, 18, false, true, 8},
      {"q4_1x8", 32, 20, false, true, 8},
  };
  auto i = static_cast<size_t>(t);
  INGOT_CHECK(i < sizeof(table) / sizeof(table[0]));
  return table[i];
}

size_t dtype_size(DType t) {
  const DTypeInfo& info = dtype_info(t);
  INGOT_CHECK(!info.is_quantized, "dtype_size of a packed type ", info.name);
  return static_cast<size_t>(info.block_bytes);
}

size_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  INGOT_CHECK(n % info.block_elems == 0, "length ", n, " is not a multiple of the ", info.name,
              " block");
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
}

DType parse_dtype(std::string_view s) {
  if (s == "float32" || s == "f32" || s == "F32") return DType::F32;
  if (s == "bfloat16" || s == "bf16" || s == "BF16") return DType::BF16;
  if (s == "float16" || s == "f16" || s == "F16") return DType::F16;
  if (s == "int32" || s == "i32" || s == "I32") return DType::I32;
  if (s == "int64" || s == "i64" || s == "I64") return DType::I64;
  fail(ErrorKind::InvalidArgument, "unknown dtype '", s, "'");
}

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Device parse_device(std::string_view s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda" || s == "gpu") return Device::CUDA;
  fail(ErrorKind::InvalidArgument, "unknown device '", s, "' (cpu or cuda)");
}

}  // namespace ingot
