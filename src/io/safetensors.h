// safetensors: validated header parsing, zero-copy mmap'd tensors, sharded
// checkpoints (model.safetensors.index.json), and a writer.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ingot {

class MappedFile;

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte offsets relative to the data section
};

// One .safetensors file.
class SafetensorsFile {
 public:
  // Validates the header completely (size, JSON, dtypes, shapes vs byte
  // ranges, ranges inside the file, no overlaps). Throws Error(BadFormat).
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Same checks over bytes already in memory (fuzzing, tests).
  static std::vector<TensorInfo> parse_header(const uint8_t* data, size_t size,
                                              std::map<std::string, std::string>* metadata,
                                              size_t* data_start);

  const std::vector<TensorInfo>& tensors() const { return infos_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // Zero-copy view into the map.
  Tensor get(const std::string& name) const;
  const std::string& path() const;

 private:
  std::shared_ptr<MappedFile> file_;
  size_t data_start_ = 0;
  std::vector<TensorInfo> infos_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All weights of a checkpoint directory: model.safetensors, or the shards
// named by model.safetensors.index.json, or every *.safetensors file.
class WeightStore {
 public:
  static std::unique_ptr<WeightStore> open_dir(const std::string& dir);
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  Tensor get(const std::string& name) const;  // Error(BadFormat) naming the tensor if absent
  std::vector<std::string> names() const;
  size_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;
};

// Writes tensors (CPU, any scalar dtype) to `path` atomically (temp + rename).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace ingot
