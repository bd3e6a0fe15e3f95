#include "backend/cpu/kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "tensor/half.h"
#include "util/error.h"

namespace ingot::cpu {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    c.avx512vnni = __builtin_cpu_supports("avx512vnni");
    c.avxvnni = __builtin_cpu_supports("avxvnni");
    c.f16c = c.avx2;  // every AVX2 CPU we target has F16C
    return c;
  }();
  return f;
}

void to_f32(const void* src, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u = static_cast<uint32_t>(s[i]) << 16;
        std::memcpy(&dst[i], &u, 4);
      }
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: fail(ErrorKind::Unsupported, "to_f32 from ", dtype_name(t));
  }
}

namespace {

// Dot product with 16 independent partial sums in a fixed order, so the
// result for a (row, column) pair does not depend on the batch around it.
inline float dot16(const float* a, const float* b, int64_t k) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < k; ++i, ++j) acc[j] += a[i] * b[i];
  float s = 0;
  for (int j = 0; j < 16; ++j) s += acc[j];
  return s;
}

QuantKernels g_quant[32];
bool g_quant_set[32] = {false};

}  // namespace

void register_quant_kernels(DType key, QuantKernels k) {
  g_quant[static_cast<int>(key)] = k;
  g_quant_set[static_cast<int>(key)] = true;
}

const QuantKernels* quant_kernels(DType key) {
  return g_quant_set[static_cast<int>(key)] ? &g_quant[static_cast<int>(key)] : nullptr;
}

void linear_dense(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw,
                  int64_t m, float* y) {
  const size_t es = dtype_size(wdt);
  constexpr int64_t kTile = 8;  // weight rows converted to f32 once per tile
  int64_t tiles = (m + kTile - 1) / kTile;
  pool().parallel_for(tiles, 1, [&](int64_t tb, int64_t te) {
    std::vector<float> wf(static_cast<size_t>(kTile * k));
    for (int64_t t = tb; t < te; ++t) {
      int64_t j0 = t * kTile, j1 = std::min(m, j0 + kTile);
      const float* rows[kTile];
      for (int64_t j = j0; j < j1; ++j) {
        const void* src = static_cast<const uint8_t*>(w) + static_cast<size_t>(j * ldw) * es;
        if (wdt == DType::F32) {
          rows[j - j0] = static_cast<const float*>(src);
        } else {
          to_f32(src, wdt, k, wf.data() + (j - j0) * k);
          rows[j - j0] = wf.data() + (j - j0) * k;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * k;
        for (int64_t j = j0; j < j1; ++j) y[i * m + j] = dot16(xi, rows[j - j0], k);
      }
    }
  });
}

}  // namespace ingot::cpu
