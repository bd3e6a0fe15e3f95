// Quantized linear / embedding on CUDA: checks the Weight's layout, then picks
// the decode GEMV (n <= 8 rows, formats with a kernel) or dequantize + cuBLAS.
#include "backend/cuda/quant_linear.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_gemv.h"
#include "backend/cuda/runtime.h"
#include "util/error.h"

namespace ingot::cuda {

namespace {

// Row tiles of the dequantized weight are at most this large, so prefill of a
// large vocabulary head needs no gigabyte of scratch.
constexpr int64_t kScratchBytes = 64ll << 20;

// The kernels' view of `w`; fails with a clear message on a layout they cannot read.
QuantMatrix view_of(const Weight& w) {
  QuantMatrix q;
  if (w.data.device() != Device::CUDA)
    fail(ErrorKind::InvalidArgument, "quantized weight ", w.data.describe(), " is not on the GPU");
  q.m = w.rows();
  q.k = w.cols();
  if (w.is_affine()) {
    if (w.bits != 4 && w.bits != 8)
      fail(ErrorKind::Unsupported, "affine weights with ", w.bits, " bits on cuda (only 4 and 8)");
    q.format = w.bits == 4 ? QuantFormat::Affine4 : QuantFormat::Affine8;
    if (w.group_size <= 0 || w.group_size % 32 != 0 || q.k % w.group_size != 0)
      fail(ErrorKind::Unsupported, "affine group size ", w.group_size, " for width ", q.k,
           " (needs a multiple of 32 that divides the width)");
    if (w.data.dtype() != DType::U32 || w.data.stride(1) != 1)
      fail(ErrorKind::BadFormat, "affine weight words must be uint32 with contiguous rows");
    auto params_ok = [&](const Tensor& t) {
      return t.dtype() == DType::F32 && t.is_contiguous() && t.device() == Device::CUDA &&
             t.numel() == q.m * (q.k / w.group_size);
    };
    if (!w.scales.defined() || !params_ok(w.scales))
      fail(ErrorKind::BadFormat, "affine weight needs contiguous float32 scales [", q.m, ", ", q.k / w.group_size,
           "] on the GPU");
    if (w.biases.defined() && !params_ok(w.biases))
      fail(ErrorKind::BadFormat, "affine weight biases do not match its scales");
    q.data = static_cast<const uint8_t*>(w.data.raw());
    q.row_bytes = w.data.stride(0) * 4;
    q.scales = w.scales.data<float>();
    q.biases = w.biases.defined() ? w.biases.data<float>() : nullptr;
    q.group_size = w.group_size;
    q.group_stride = q.k / w.group_size;
    return q;
  }
  switch (w.dtype()) {
    case DType::Q8_0: q.format = QuantFormat::Q8_0; break;
    case DType::Q4_0: q.format = QuantFormat::Q4_0; break;
    case DType::Q4_1: q.format = QuantFormat::Q4_1; break;
    case DType::Q4_K: q.format = QuantFormat::Q4_K; break;
    case DType::Q5_K: q.format = QuantFormat::Q5_K; break;
    case DType::Q6_K: q.format = QuantFormat::Q6_K; break;
    default: fail(ErrorKind::Unsupported, "CUDA kernels for ", dtype_name(w.dtype()), " weights are not available");
  }
  if (q.k % quant_block_values(q.format) != 0)
    fail(ErrorKind::Unsupported, "quantized linear: width ", q.k, " is not a multiple of ",
         quant_block_values(q.format));
  if (!w.data.is_contiguous()) fail(ErrorKind::BadFormat, "quantized weight rows must be contiguous");
  q.data = static_cast<const uint8_t*>(w.data.raw());
  q.row_bytes = static_cast<int64_t>(dtype_bytes(w.dtype(), q.k));
  return q;
}

// y[n, m] = x · Wᵀ through row tiles of W dequantized into float32 scratch
// (the values the GEMV sums, so a row's result hardly depends on the path) and cuBLAS.
void dequant_gemm(const QuantMatrix& q, const Tensor& x, float* y, int64_t n) {
  const DType dt = DType::F32;
  const int64_t tile = std::clamp<int64_t>(kScratchBytes / std::max<int64_t>(1, q.k * 4), 1, q.m);
  Tensor scratch = Tensor::empty({tile, q.k}, dt, Device::CUDA);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t r0 = 0; r0 < q.m; r0 += tile) {
    const int64_t rows = std::min(tile, q.m - r0);
    launch_quant_dequant_rows(q, r0, rows, scratch.raw(), dt);
    // Row-major y[:, r0:r0+rows] = x · Tileᵀ is column-major yᵀ[rows, n] (ld m) = Tileᵀᵀ · xᵀ.
    CUBLAS_OK(cublasGemmEx(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                           static_cast<int>(q.k), &one, scratch.raw(), CUDA_R_32F, static_cast<int>(q.k), x.raw(),
                           CUDA_R_32F, static_cast<int>(q.k), &zero, y + r0, CUDA_R_32F, static_cast<int>(q.m),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

Tensor dev_f32(const Tensor& t) {
  Tensor c = t.device() == Device::CUDA ? t : t.to(Device::CUDA);
  c = c.contiguous();
  if (c.dtype() == DType::F32) return c;
  Tensor o = Tensor::empty(c.shape(), DType::F32, Device::CUDA);
  launch_cast(c.raw(), c.dtype(), o.raw(), DType::F32, c.numel());
  return o;
}

Tensor quant_linear(const Tensor& x_in, const Weight& w, const Tensor* bias) {
  const QuantMatrix q = view_of(w);
  Tensor x = dev_f32(x_in);
  const int64_t k = x.ndim() ? x.dim(-1) : 1, n = x.ndim() ? x.numel() / k : 1;
  if (q.k != k) fail(ErrorKind::BadFormat, "linear: input width ", k, " vs weight ", w.data.describe());
  std::vector<int64_t> shape = x.shape().vec();
  shape.back() = q.m;
  Tensor y = Tensor::empty(Shape(shape), DType::F32, Device::CUDA);
  if (n == 0 || q.m == 0) return y;
  if (n <= kGemvMaxRows && quant_gemv_supported(q.format) && aligned16(x.raw()))
    launch_quant_gemv(q, x.data<float>(), y.data<float>(), n);
  else
    dequant_gemm(q, x, y.data<float>(), n);
  if (bias && bias->defined()) {
    Tensor b = dev_f32(*bias);
    INGOT_CHECK(b.numel() == q.m, "linear bias ", b.describe(), " for ", q.m, " outputs");
    launch_add_bias(y.data<float>(), b.data<float>(), n, q.m);
  }
  return y;
}

namespace {

bool is_quant(const Weight& w) { return w.is_affine() || is_quantized(w.dtype()); }

// x as the fused GEMVs take it: float32, contiguous, aligned, on the GPU, 1..8 rows of width k.
bool fused_x_fits(const Tensor& x, int64_t k) {
  return x.device() == Device::CUDA && x.dtype() == DType::F32 && x.is_contiguous() &&
         x.ndim() >= 1 && x.dim(-1) == k && x.numel() / k >= 1 && x.numel() / k <= kGemvMaxRows &&
         aligned16(x.raw());
}

Tensor out_like(const Tensor& x, int64_t m) {
  std::vector<int64_t> shape = x.shape().vec();
  shape.back() = m;
  return Tensor::empty(Shape(shape), DType::F32, Device::CUDA);
}

}  // namespace

Tensor quant_linear_residual(const Tensor& x, const Weight& w, const Tensor& residual) {
  if (!is_quant(w)) return Tensor();
  const QuantMatrix q = view_of(w);
  if (!fused_x_fits(x, q.k) || residual.device() != Device::CUDA || residual.dtype() != DType::F32 ||
      !residual.is_contiguous() || residual.numel() != x.numel() / q.k * q.m)
    return Tensor();
  Tensor y = Tensor::empty(residual.shape(), DType::F32, Device::CUDA);
  launch_quant_gemv_residual(q, x.data<float>(), residual.data<float>(), y.data<float>(), x.numel() / q.k);
  return y;
}

Tensor quant_swiglu_linear(const Tensor& x, const Weight& gate, const Weight& up) {
  if (!is_quant(gate) || !is_quant(up)) return Tensor();
  const QuantMatrix g = view_of(gate), u = view_of(up);
  if (!fused_x_fits(x, g.k) || !quant_gemv_pair_applies(g, u)) return Tensor();
  Tensor y = out_like(x, g.m);
  launch_quant_gemv_swiglu(g, u, x.data<float>(), y.data<float>(), x.numel() / g.k);
  return y;
}

std::vector<Tensor> quant_linear_many(const Tensor& x, const std::vector<const Weight*>& w) {
  if (w.empty() || w.size() > 3) return {};
  QuantMatrix q[3];
  for (size_t i = 0; i < w.size(); ++i) {
    if (!is_quant(*w[i])) return {};
    q[i] = view_of(*w[i]);
  }
  const int count = static_cast<int>(w.size());
  if (!fused_x_fits(x, q[0].k) || !quant_gemv_multi_applies(q, count)) return {};
  std::vector<Tensor> out;
  float* y[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < count; ++i) {
    out.push_back(out_like(x, q[i].m));
    y[i] = out.back().data<float>();
  }
  launch_quant_gemv_multi(q, y, count, x.data<float>(), x.numel() / q[0].k);
  return out;
}

Tensor quant_embedding(const Weight& table, const Tensor& ids_in) {
  const QuantMatrix q = view_of(table);
  if (ids_in.dtype() != DType::I32) fail(ErrorKind::InvalidArgument, "embedding ids must be int32");
  Tensor ids = ids_in.contiguous();
  // Host ids are checked like the CPU backend does; device ids (graph steps) cannot
  // be without a sync, and the kernel writes zeros for any outside the table.
  if (ids.device() == Device::CPU)
    for (int64_t i = 0; i < ids.numel(); ++i)
      if (const int32_t id = ids.data<int32_t>()[i]; id < 0 || id >= q.m)
        fail(ErrorKind::InvalidArgument, "token id ", id, " is out of range for vocabulary size ", q.m);
  ids = ids.to(Device::CUDA);
  Tensor out = Tensor::empty({ids.numel(), q.k}, DType::F32, Device::CUDA);
  launch_quant_embedding(q, ids.data<int32_t>(), ids.numel(), out.data<float>());
  return out;
}

}  // namespace ingot::cuda
