// Where token j of a paged block table lives, for the paged kernels
// (paged.cu, paged_write.cu): internal to each including file.
#pragma once
#include <cstdint>

namespace ingot::cuda {

namespace {

// Block and slot of token j (shifts when the block size is a power of two).
struct BlockIndex {
  int64_t bs;
  int shift;  // < 0: divide
  __device__ int64_t block(int64_t j) const { return shift >= 0 ? j >> shift : j / bs; }
  __device__ int64_t slot(int64_t j) const { return shift >= 0 ? j & (bs - 1) : j % bs; }
};

inline int shift_of(int64_t n) {
  if (n <= 0 || (n & (n - 1)) != 0) return -1;
  int s = 0;
  while ((int64_t{1} << s) < n) ++s;
  return s;
}

// Region r (0 K codes, 1 K params, 2 V codes, 3 V params) of the row holding
// token j of KV head kh; `rb` bytes (or floats, for params) per row.
__device__ inline const uint8_t* row_of(const uint8_t* const* blocks, const BlockIndex& ix, int r, int64_t j,
                                        int64_t kh, int64_t rb) {
  return blocks[4 * ix.block(j) + r] + (kh * ix.bs + ix.slot(j)) * rb;
}

}  // namespace

}  // namespace ingot::cuda
