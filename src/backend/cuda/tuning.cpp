#include "backend/cuda/tuning.h"

#include <cuda_runtime.h>

#include "util/error.h"
#include "util/log.h"

namespace ingot::cuda {

namespace {

struct Row {
  int sm;  // compute capability as 10 * major + minor
  Tuning t;
};

// Measured on the H200 (bench/RESULTS.md). Add a row per architecture once
// its numbers are in; until then it takes the sm_90 row.
Tuning sm90() {
  Tuning t;
  // 6 to 8 activation rows on the tensor cores: 1B decode at batch 8 1.44x
  // (H100, 2026-12-08); fewer rows are faster on the CUDA-core GEMV, more on cuBLAS.
  t.mma_gemv_min_rows = 6;
  t.mma_gemv_max_rows = 8;
  return t;
}

const Row kRows[] = {
    {90, sm90()},
};

// The device's compute capability, 10 * major + minor (sm_90 if it cannot be read).
int device_sm() {
  static const int sm = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 90;
    }
    return 10 * major + minor;
  }();
  return sm;
}

Tuning& current() {
  static Tuning t = tuning_for(device_sm() / 10, device_sm() % 10);
  return t;
}

}  // namespace

Tuning tuning_for(int major, int minor, int* row_sm) {
  const Row* row = &kRows[0];
  for (const Row& r : kRows)
    if (r.sm == 10 * major + minor) row = &r;
  if (row_sm) *row_sm = row->sm;
  return row->t;
}

const Tuning& tuning() { return current(); }

std::string describe(const Tuning& t) {
  return str_cat("split_blocks_per_sm=", t.split_blocks_per_sm, " qgemv_int8_min_values=", t.qgemv_int8_min_values,
                 " mma_attention=", t.mma_attention ? "true" : "false",
                 " mma_gemv_rows=", t.mma_gemv_min_rows, "..", t.mma_gemv_max_rows);
}

void log_tuning() {
  int row = 0;
  tuning_for(device_sm() / 10, device_sm() % 10, &row);
  log::debug("cuda: sm_", device_sm(), ", tuning row sm_", row, ": ", describe(tuning()));
}

ScopedTuning::ScopedTuning(const Tuning& t) : saved_(current()) { current() = t; }
ScopedTuning::~ScopedTuning() { current() = saved_; }

}  // namespace ingot::cuda
