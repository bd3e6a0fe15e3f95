#include "quant/interleave.h"

#include <cstring>

#include "backend/cpu/thread_pool.h"

namespace ingot::quant {

namespace {

// The interleaved dtype of a file format and its layout (layout nullptr: none).
struct Interleaved {
  DType dtype = DType::U8;
  const GroupLayout* layout = nullptr;
};
Interleaved interleaved_of(DType t) {
  switch (t) {
    case DType::Q8_0: return {DType::Q8_0x8, &kQ8_0Groups};
    case DType::Q4_0: return {DType::Q4_0x8, &kQ4_0Groups};
    case DType::Q4_1: return {DType::Q4_1x8, &kQ4_1Groups};
    default: return {};
  }
}

}  // namespace

bool can_interleave(const Weight& w) {
  if (w.is_affine() || w.device() != Device::CPU || w.data.ndim() != 2 || !w.data.is_contiguous()) return false;
  return interleaved_of(w.dtype()).layout && w.rows() > 0 && w.rows() % kGroupRows == 0;
}

Weight interleave_rows(const Weight& w) {
  if (!can_interleave(w)) return w;
  const Interleaved target = interleaved_of(w.dtype());
  const GroupLayout& l = *target.layout;
  const int64_t nb = w.cols() / 32, groups = w.rows() / kGroupRows;
  const size_t row_bytes = static_cast<size_t>(nb) * l.row_block();
  Weight out = w;
  out.data = Tensor::empty(w.data.shape(), target.dtype);
  const auto* src = static_cast<const uint8_t*>(w.data.raw());
  auto* dst = static_cast<uint8_t*>(out.data.raw());
  cpu::pool().parallel_for(groups, 8, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* o = dst + (static_cast<size_t>(g) * nb + b) * l.group_block();
        for (int r = 0; r < kGroupRows; ++r) {
          const uint8_t* s = src + static_cast<size_t>(g * kGroupRows + r) * row_bytes + static_cast<size_t>(b) * l.row_block();
          for (int f = 0; f < l.fields; ++f) std::memcpy(o + 2 * (f * kGroupRows + r), s + 2 * f, 2);
          const uint8_t* v = s + 2 * l.fields;
          for (int t = 0; t < l.value_bytes / 4; ++t) std::memcpy(o + l.runs_offset() + 32 * t + 4 * r, v + 4 * t, 4);
        }
      }
  });
  return out;
}

void row_block_of_group(const uint8_t* group_block, const GroupLayout& l, int lane, uint8_t* out) {
  for (int f = 0; f < l.fields; ++f) std::memcpy(out + 2 * f, group_block + 2 * (f * kGroupRows + lane), 2);
  uint8_t* v = out + 2 * l.fields;
  for (int t = 0; t < l.value_bytes / 4; ++t) std::memcpy(v + 4 * t, group_block + l.runs_offset() + 32 * t + 4 * lane, 4);
}

}  // namespace ingot::quant
