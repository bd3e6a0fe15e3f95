#include "quant/q8_0_writer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "backend/cpu/thread_pool.h"
#include "tensor/half.h"
#include "util/error.h"

namespace ingot::quant {

Weight quantize_q8_0(const Tensor& w_in) {
  if (w_in.ndim() != 2 || !dtype_info(w_in.dtype()).is_float)
    fail(ErrorKind::InvalidArgument, "Q8_0 quantization needs a float matrix, got ", w_in.describe());
  const int64_t rows = w_in.dim(0), cols = w_in.dim(1);
  if (cols % 32 != 0) fail(ErrorKind::InvalidArgument, "Q8_0 quantization needs a width that is a multiple of 32, got ", cols);
  Tensor w = w_in.to(Device::CPU).to(DType::F32).contiguous();
  Weight out;
  out.data = Tensor::empty({rows, cols}, DType::Q8_0);
  const float* src = w.data<float>();
  auto* dst = static_cast<uint8_t*>(out.data.raw());
  const int64_t blocks = rows * cols / 32;
  std::atomic<bool> finite{true};  // pool tasks must not throw: checked after
  cpu::pool().parallel_for(blocks, 1024, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* x = src + b * 32;
      uint8_t* p = dst + b * 34;
      float amax = 0;
      bool ok = true;
      for (int i = 0; i < 32; ++i) {
        ok &= std::isfinite(x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      if (!ok) finite = false;
      // Quantize with the scale as stored (through f16), so each value is within half a step of it.
      const uint16_t h = f32_to_f16(amax / 127.0f);
      const float d = f16_to_f32(h), inv = d > 0 ? 1.0f / d : 0.0f;
      std::memcpy(p, &h, 2);
      for (int i = 0; i < 32; ++i) {
        const long v = std::clamp(std::lround(x[i] * inv), -127L, 127L);
        p[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(v));
      }
    }
  });
  if (!finite) fail(ErrorKind::BadFormat, "Q8_0 quantization: the matrix holds a NaN or infinity");
  return out;
}

}  // namespace ingot::quant
