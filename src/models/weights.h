// Where a model's parameters come from. Model code asks for parameters by
// their Hugging Face names; a source maps those onto a file format
// (safetensors, GGUF) and places them on the target device.
#pragma once
#include <memory>
#include <string>

#include "io/config.h"
#include "ops/collective.h"
#include "ops/weight.h"

namespace ingot {

struct LoadOptions {
  Device device = Device::CPU;
  // Dense weights are converted to this dtype at load; nullopt keeps the file's.
  std::optional<DType> dtype;
  // Tensor parallelism: this rank's group, summing the outputs of row-parallel
  // linears (nullptr: the model is whole on one device).
  Collective* collective = nullptr;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // A 2-D matrix (dense, block-quantized or affine) on the target device.
  virtual Weight matrix(const std::string& name) const = 0;
  // A 1-D (or small) parameter as float32 on the target device.
  virtual Tensor vector(const std::string& name) const = 0;
  // Any tensor as stored, on the host (conv kernels, odd shapes).
  virtual Tensor raw(const std::string& name) const = 0;
  // Bytes of all parameters (memory budget).
  virtual size_t total_bytes() const = 0;
};

// safetensors checkpoints, including MLX affine quantized ones
// (`<name>.weight` uint32 + `<name>.scales` + `<name>.biases`).
std::unique_ptr<WeightSource> open_safetensors_source(const std::string& dir, const ModelConfig& cfg,
                                                      const LoadOptions& opt);

}  // namespace ingot
