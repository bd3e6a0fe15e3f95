#include <cstdlib>
#include <cstring>
#include <mutex>

#include "quant/internal.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::quant {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512Vnni: return "avx512-vnni";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  const auto& f = cpu::cpu_features();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::Avx512Vnni: return f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
  }
  return false;
}

Isa best_isa() {
  if (const char* e = std::getenv("INGOT_QUANT_ISA")) {
    Isa want = std::strcmp(e, "scalar") == 0 ? Isa::Scalar : std::strcmp(e, "avx2") == 0 ? Isa::Avx2 : Isa::Avx512Vnni;
    if (isa_supported(want)) return want;
  }
  if (isa_supported(Isa::Avx512Vnni)) return Isa::Avx512Vnni;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

cpu::QuantKernels kernels(Isa isa, DType key) {
  if (!isa_supported(isa)) fail(ErrorKind::Unsupported, "this CPU lacks ", isa_name(isa));
  cpu::QuantKernels k = isa == Isa::Scalar ? scalar::kernels_for(key)
                        : isa == Isa::Avx2 ? avx2::kernels_for(key)
                                           : avx512::kernels_for(key);
  if (!k.linear) fail(ErrorKind::Unsupported, "no quantized kernels for ", dtype_name(key));
  return k;
}

void install_cpu_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Isa isa = best_isa();
    for (DType key : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q8_0x8, DType::Q4_0x8, DType::Q4_1x8,
                      DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::U32})
      cpu::register_quant_kernels(key, kernels(isa, key));
  });
}

void check_linear_shape(const Weight& w, int64_t block) {
  if (w.cols() % block != 0)
    fail(ErrorKind::Unsupported, "quantized linear: width ", w.cols(), " is not a multiple of ", block);
  if (w.is_affine()) {
    if (w.group_size <= 0 || w.group_size % 32 != 0)
      fail(ErrorKind::Unsupported, "affine group size ", w.group_size, " is not a multiple of 32");
    if (!w.scales.defined() || w.scales.dtype() != DType::F32 || !w.scales.is_contiguous() ||
        w.scales.numel() != w.rows() * (w.cols() / w.group_size))
      fail(ErrorKind::BadFormat, "affine weight needs contiguous float32 scales [", w.rows(), ", ",
           w.cols() / w.group_size, "]");
    if (w.biases.defined() && (w.biases.dtype() != DType::F32 || !w.biases.is_contiguous() ||
                               w.biases.numel() != w.scales.numel()))
      fail(ErrorKind::BadFormat, "affine weight biases do not match its scales");
  } else if (!w.data.is_contiguous()) {
    fail(ErrorKind::BadFormat, "quantized weight rows must be contiguous");
  }
}

void fail_affine_bits(int bits) { fail(ErrorKind::Unsupported, "affine weights with ", bits, " bits (only 4 and 8)"); }

}  // namespace ingot::quant
