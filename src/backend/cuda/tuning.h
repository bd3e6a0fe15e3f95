// The CUDA backend's tuning: every setting that picks a launch plan from
// measurements, in one struct. Each architecture has a row of defaults; the
// row for the device's compute capability is chosen once at start-up (and
// logged at --log-level debug). Only sm_90 (H100 / H200) has been measured:
// every other architecture takes the sm_90 row until it is.
#pragma once
#include <cstdint>
#include <string>

namespace ingot::cuda {

struct Tuning {
  // Decode attention splits a row's keys across blocks (flash-decoding) until
  // about this many blocks run per SM; 0 never splits. (8 measured 2.7 %
  // faster on the 1B graph-replayed decode at 4k keys but 6 % slower with
  // paged rows: bench/RESULTS.md.)
  int64_t split_blocks_per_sm = 4;
  // Q8_0 / Q4_0 / Q4_1 decode GEMVs over at least this many weight values
  // round x to int8 (quant_gemv_int8.cu); smaller launches keep float32 x,
  // where the rounding prologue's latency outweighs the faster reads.
  int64_t qgemv_int8_min_values = int64_t(24) << 20;
  // Prefill attention over bf16 K/V on the tensor cores where the MMA kernel
  // takes the shape (attention_mma.cuh); false keeps the CUDA-core kernels.
  bool mma_attention = true;
  // Decode products of bf16 weights with this many activation rows, up to
  // mma_gemv_max_rows, run on the tensor cores (gemv_mma.cu); fewer take the
  // CUDA-core GEMV (8 rows at most), more take cuBLAS. Off (min > max) unless
  // an architecture's row turns it on (sm_90: 6..8).
  int64_t mma_gemv_min_rows = 65;
  int64_t mma_gemv_max_rows = 64;
};

// The defaults for compute capability major.minor, and the architecture whose
// measured row they are (90 for sm_90).
Tuning tuning_for(int major, int minor, int* row_sm = nullptr);
// The settings in force: the device's row unless a ScopedTuning replaced it.
const Tuning& tuning();
// "split_blocks_per_sm=4 qgemv_int8_min_values=25165824 ..."
std::string describe(const Tuning& t);
// Reads the device's row (once) and logs it at debug level.
void log_tuning();

// Replaces the settings for its lifetime (tests; one thread, no launch in flight
// that should see the old values).
class ScopedTuning {
 public:
  explicit ScopedTuning(const Tuning& t);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  Tuning saved_;
};

}  // namespace ingot::cuda
