// Byte layouts of the packed formats, shared by the reference and SIMD code.
#pragma once
#include <cstdint>
#include <cstring>

#include "ops/weight.h"
#include "tensor/half.h"

namespace ingot::quant {

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q8_0: f16 d, int8 q[32].                      value = d * q
// Q4_0: f16 d, u8 qs[16] (lo nibble: j, hi: j+16).  value = d * (nib - 8)
// Q4_1: f16 d, f16 m, u8 qs[16].                value = d * nib + m
// Q4_K: f16 d, f16 dmin, u8 scales[12], u8 qs[128]; eight 32-value sub-blocks with 6-bit
//       scale/min; the 32 bytes of each 64-value chunk hold sub-block 2c (lo) and 2c+1 (hi).
// Q5_K: as Q4_K plus u8 qh[32] (bit j of qh[l] is the fifth bit of value l of sub-block j),
//       layout d, dmin, scales[12], qh[32], qs[128].
// Q6_K: u8 ql[128], u8 qh[64], int8 scales[16], f16 d; sixteen 16-value groups, value
//       d * scale * (q6 - 32).
constexpr int kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;

// 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block.
inline void k_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The unsigned 6-bit value l (0..127) of one Q6_K half (ql: 64 bytes, qh: 32 bytes).
inline int q6_value(const uint8_t* ql, const uint8_t* qh, int l) {
  int quarter = l / 32, i = l % 32;
  int lo = quarter & 1 ? ql[i + 32] : ql[i];
  lo = quarter >= 2 ? lo >> 4 : lo & 0xF;
  int hi = (qh[i] >> (2 * quarter)) & 3;
  return lo | (hi << 4);
}

}  // namespace ingot::quant
