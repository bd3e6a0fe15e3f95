// Scalar dequantization (embeddings, tests) and the float reference linear.
#include <cmath>
#include <vector>

#include "quant/formats.h"
#include "quant/interleave.h"
#include "quant/quant.h"
#include "util/error.h"

namespace ingot::quant {

namespace {

void dequant_q8_0(const uint8_t* p, int64_t k, float* out) {
  for (int64_t b = 0; b < k / 32; ++b, p += 34) {
    float d = load_f16(p);
    const auto* q = reinterpret_cast<const int8_t*>(p + 2);
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(q[i]);
  }
}

void dequant_q4(const uint8_t* p, int64_t k, float* out, bool has_min) {
  const int bytes = has_min ? 20 : 18;
  for (int64_t b = 0; b < k / 32; ++b, p += bytes) {
    float d = load_f16(p);
    float m = has_min ? load_f16(p + 2) : -8.0f * d;
    const uint8_t* qs = p + (has_min ? 4 : 2);
    for (int i = 0; i < 16; ++i) {
      out[b * 32 + i] = d * static_cast<float>(qs[i] & 0xF) + m;
      out[b * 32 + i + 16] = d * static_cast<float>(qs[i] >> 4) + m;
    }
  }
}

// Row `lane` of the group starting at p, one block at a time through the file layout.
void dequant_group_row(const uint8_t* p, int64_t k, int lane, float* out, const GroupLayout& l,
                       void (*dequant)(const uint8_t*, int64_t, float*)) {
  uint8_t block[64];
  for (int64_t b = 0; b < k / 32; ++b, p += l.group_block()) {
    row_block_of_group(p, l, lane, block);
    dequant(block, 32, out + b * 32);
  }
}
void dequant_q4_0(const uint8_t* p, int64_t k, float* out) { dequant_q4(p, k, out, false); }
void dequant_q4_1(const uint8_t* p, int64_t k, float* out) { dequant_q4(p, k, out, true); }

void dequant_k45(const uint8_t* p, int64_t k, float* out, bool five) {
  const int bytes = five ? kQ5KBytes : kQ4KBytes;
  for (int64_t b = 0; b < k / 256; ++b, p += bytes) {
    float d = load_f16(p), dmin = load_f16(p + 2);
    const uint8_t* scales = p + 4;
    const uint8_t* qh = p + 16;
    const uint8_t* qs = p + (five ? 48 : 16);
    float* o = out + b * 256;
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      k_scale_min(scales, j, &sc, &mn);
      const uint8_t* q = qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int v = j % 2 ? q[l] >> 4 : q[l] & 0xF;
        if (five && (qh[l] >> j & 1)) v += 16;
        o[j * 32 + l] = d * static_cast<float>(sc) * static_cast<float>(v) - dmin * static_cast<float>(mn);
      }
    }
  }
}

void dequant_q6_k(const uint8_t* p, int64_t k, float* out) {
  for (int64_t b = 0; b < k / 256; ++b, p += kQ6KBytes) {
    const uint8_t* ql = p;
    const uint8_t* qh = p + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    float d = load_f16(p + 208);
    for (int e = 0; e < 256; ++e) {
      int h = e / 128;
      int v = q6_value(ql + 64 * h, qh + 32 * h, e % 128) - 32;
      out[b * 256 + e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(v);
    }
  }
}

void dequant_affine(const Weight& w, int64_t row, float* out) {
  const int64_t k = w.cols();
  const auto* words = w.data.data<uint32_t>() + row * w.data.stride(0);
  const float* sc = w.scales.data<float>() + row * w.scales.stride(0);
  const float* bi = w.biases.defined() ? w.biases.data<float>() + row * w.biases.stride(0) : nullptr;
  const int per_word = 32 / w.bits;
  const uint32_t mask = (1u << w.bits) - 1;
  for (int64_t i = 0; i < k; ++i) {
    uint32_t v = (words[i / per_word] >> (w.bits * (i % per_word))) & mask;
    int64_t g = i / w.group_size;
    out[i] = sc[g] * static_cast<float>(v) + (bi ? bi[g] : 0.0f);
  }
}

}  // namespace

size_t row_bytes(const Weight& w) {
  if (w.is_affine()) return static_cast<size_t>(w.data.dim(1)) * 4;
  return dtype_bytes(w.dtype(), w.cols());
}

void dequantize_row(const Weight& w, int64_t row, float* out) {
  if (row < 0 || row >= w.rows()) fail(ErrorKind::InvalidArgument, "row ", row, " out of range");
  if (w.is_affine()) return dequant_affine(w, row, out);
  const int64_t k = w.cols();
  const int group = dtype_info(w.dtype()).row_group;
  const int64_t first = row - row % group;  // interleaved rows: their group's first row
  const uint8_t* p = static_cast<const uint8_t*>(w.data.raw()) + static_cast<size_t>(first) * row_bytes(w);
  switch (w.dtype()) {
    case DType::Q8_0x8: return dequant_group_row(p, k, static_cast<int>(row - first), out, kQ8_0Groups, dequant_q8_0);
    case DType::Q4_0x8: return dequant_group_row(p, k, static_cast<int>(row - first), out, kQ4_0Groups, dequant_q4_0);
    case DType::Q4_1x8: return dequant_group_row(p, k, static_cast<int>(row - first), out, kQ4_1Groups, dequant_q4_1);
    case DType::Q8_0: return dequant_q8_0(p, k, out);
    case DType::Q4_0: return dequant_q4(p, k, out, false);
    case DType::Q4_1: return dequant_q4(p, k, out, true);
    case DType::Q4_K: return dequant_k45(p, k, out, false);
    case DType::Q5_K: return dequant_k45(p, k, out, true);
    case DType::Q6_K: return dequant_q6_k(p, k, out);
    default: fail(ErrorKind::Unsupported, "no dequantization for ", dtype_name(w.dtype()));
  }
}

void reference_linear(const float* x, int64_t n, const Weight& w, float* y) {
  const int64_t k = w.cols(), m = w.rows();
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < m; ++j) {
    dequantize_row(w, j, row.data());
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t c = 0; c < k; ++c) s += static_cast<double>(x[i * k + c]) * row[static_cast<size_t>(c)];
      y[i * m + j] = static_cast<float>(s);
    }
  }
}

}  // namespace ingot::quant
