// Rotary-embedding frequency tables from a config's rope parameters
// (default, linear, llama3, dynamic-free yarn and partial rotary).
#pragma once
#include <string>

#include "ops/backend.h"

namespace ingot {

struct RopeParams {
  std::string type = "default";  // default | linear | llama3 | yarn | proportional
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 0;
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 0, mscale_all_dim = 0;
  double attention_factor = 0;  // yarn: 0 = derive from factor
  double partial_rotary_factor = 1.0;
};

// head_dim: full head width; rotary_dim is head_dim * partial_rotary_factor (even).
RopeSpec make_rope_spec(const RopeParams& p, int head_dim, bool interleaved = false);

}  // namespace ingot
