// Writing MLX-style affine checkpoints: every 2-D weight matrix becomes
// uint32-packed `bits`-bit values with a scale and a bias per `group_size`
// run of a row (value = scale * q + bias); everything else is copied.
#pragma once
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ingot::quant {

struct AffineTensors {
  Tensor weight;  // uint32 [rows, cols * bits / 32]
  Tensor scales;  // float32 [rows, cols / group]
  Tensor biases;  // float32 [rows, cols / group]
};

// Quantizes a float matrix (any float dtype, CPU). cols must divide by group_size.
AffineTensors quantize_affine(const Tensor& w, int bits, int group_size);

struct QuantizeReport {
  int quantized = 0, kept = 0;
  size_t bytes_in = 0, bytes_out = 0;
};

// SRC: a Hugging Face checkpoint directory; DST: a new directory with
// model.safetensors, config.json (+ "quantization": {bits, group_size}) and
// the other files of SRC copied.
QuantizeReport quantize_checkpoint(const std::string& src_dir, const std::string& dst_dir, int bits, int group_size);

}  // namespace ingot::quant
