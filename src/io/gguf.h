// GGUF (llama.cpp's single-file format), versions 2 and 3: metadata of every
// value type including nested arrays, tensor infos, alignment, and zero-copy
// tensors over the file map. Every structural problem of a file (truncation,
// absurd counts, offsets outside the data section, unknown value or tensor
// types) is an Error(BadFormat) naming what is wrong.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tensor/tensor.h"

namespace ingot {

class MappedFile;

// GGUF metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

// One metadata value. Integers of every width are kept as int64/uint64 and
// floats as double; `type` says what the file stored.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem_type = GgufType::U8;  // arrays only
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

  bool is_int() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  bool is_string() const { return type == GgufType::STRING; }
  bool is_array() const { return type == GgufType::ARRAY; }
  // Conversions throw BadFormat naming `what` when the stored type does not fit.
  int64_t as_int(const std::string& what) const;
  double as_double(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const GgufArray& as_array(const std::string& what) const;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;        // ingot's dtype for ggml_type
  std::vector<int64_t> shape;      // row-major (outermost first): GGUF's ne reversed
  uint64_t offset = 0;             // relative to the data section
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses bytes already in memory (tests, fuzzing). `file` may be null; then get() fails.
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size,
                                         std::shared_ptr<MappedFile> file = nullptr);

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  // Typed lookups: nullopt when absent, BadFormat when present with a wrong type.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_double(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return infos_; }
  const GgufTensorInfo* tensor_info(const std::string& name) const;
  // Zero-copy view of a tensor in the map (packed types keep their blocks).
  Tensor get(const std::string& name) const;
  const std::string& path() const;
  size_t total_bytes() const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> infos_;
  std::map<std::string, size_t> index_;
};

// Maps a ggml tensor type id to ingot's dtype; nullopt for types ingot does not run.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
// ggml's name for a type id ("q4_1", ...), or "type <n>".
std::string ggml_type_name(uint32_t ggml_type);

}  // namespace ingot
