// CudaBackend: adapts Tensors to the kernels and cuBLAS. Activations are
// float32 (as on the CPU); bf16/f16 weights run through cuBLAS with the
// activations rounded to the weight type and float32 accumulation; quantized
// weights go to quant_linear.cpp.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/low_rank.h"
#include "backend/cuda/quant_linear.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/sample_rows_cuda.h"
#include "backend/cuda/tuning.h"
#include "ops/backend.h"
#include "tensor/tensor.h"

namespace ingot::cuda {

namespace {

int64_t rows_of(const Tensor& t) { return t.ndim() ? t.numel() / t.dim(-1) : 1; }

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: fail(ErrorKind::Unsupported, "no cuBLAS type for ", dtype_name(t));
  }
}

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }
  DType activation_dtype(DType) const override { return DType::F32; }

  Tensor linear(const Tensor& x_in, const Weight& w, const Tensor* bias) override {
    if (w.is_affine() || is_quantized(w.dtype())) return quant_linear(x_in, w, bias);
    Tensor x = dev_f32(x_in);
    const int64_t k = x.dim(-1), n = rows_of(x), m = w.rows();
    if (w.cols() != k) fail(ErrorKind::BadFormat, "linear: input width ", k, " vs weight ", w.data.describe());
    INGOT_CHECK(w.data.device() == Device::CUDA && w.data.stride(1) == 1);
    std::vector<int64_t> shape = x.shape().vec();
    shape.back() = m;
    Tensor y = Tensor::empty(Shape(shape), DType::F32, Device::CUDA);
    const DType wt = w.dtype();
    if (wt == DType::BF16 &&
        gemv_bf16_applies(w.data.raw(), w.data.stride(0), x.data<float>(), n, k)) {
      launch_gemv_bf16(w.data.raw(), w.data.stride(0), x.data<float>(), y.data<float>(), n, m, k);
    } else {
      gemm(x, w, y, n, m, k);
    }
    if (bias && bias->defined()) {
      Tensor b = dev_f32(*bias);
      launch_add_bias(y.data<float>(), b.data<float>(), n, m);
    }
    return y;
  }

  // The decode GEMV with the residual add in its epilogue (one launch instead of two).
  Tensor linear_residual(const Tensor& x_in, const Weight& w, const Tensor* bias, const Tensor& residual) override {
    if (!(bias && bias->defined()))
      if (Tensor y = quant_linear_residual(x_in, w, residual); y.defined()) return y;
    if (!(bias && bias->defined()) && gemv_fits(x_in, w) && residual.device() == Device::CUDA &&
        residual.dtype() == DType::F32 && residual.is_contiguous() && residual.numel() == rows_of(x_in) * w.rows()) {
      Tensor x = dev_f32(x_in);
      const int64_t n = rows_of(x), m = w.rows(), k = x.dim(-1);
      Tensor y = Tensor::empty(residual.shape(), DType::F32, Device::CUDA);
      launch_gemv_bf16_residual(w.data.raw(), w.data.stride(0), x.data<float>(), residual.data<float>(),
                                y.data<float>(), n, m, k);
      return y;
    }
    return Backend::linear_residual(x_in, w, bias, residual);
  }

  // Gate and up read in one GEMV launch that also applies SwiGLU.
  Tensor glu_linear(GluOp op, const Tensor& x_in, const Weight& gate, const Weight& up, const Tensor* gb,
                    const Tensor* ub) override {
    if (op == GluOp::SwiGlu && !(gb && gb->defined()) && !(ub && ub->defined()))
      if (Tensor y = quant_swiglu_linear(x_in, gate, up); y.defined()) return y;
    if (op == GluOp::SwiGlu && !(gb && gb->defined()) && !(ub && ub->defined()) && gemv_fits(x_in, gate) &&
        gemv_fits(x_in, up) && gate.rows() == up.rows() && gate.data.stride(0) == up.data.stride(0)) {
      Tensor x = dev_f32(x_in);
      const int64_t n = rows_of(x), m = gate.rows(), k = x.dim(-1);
      std::vector<int64_t> shape = x.shape().vec();
      shape.back() = m;
      Tensor y = Tensor::empty(Shape(shape), DType::F32, Device::CUDA);
      launch_gemv_bf16_swiglu(gate.data.raw(), up.data.raw(), gate.data.stride(0), x.data<float>(), y.data<float>(),
                              n, m, k);
      return y;
    }
    if (std::vector<Tensor> gu = gemms_on_one_input(x_in, {&gate, &up}, {gb, ub}); !gu.empty())
      return glu(op, gu[0], gu[1]);
    return Backend::glu_linear(op, x_in, gate, up, gb, ub);
  }

  // q/k/v (or any weights on one input) in one GEMV launch when each would take the GEMV alone.
  std::vector<Tensor> linear_many(const Tensor& x_in, const std::vector<const Weight*>& w,
                                  const std::vector<const Tensor*>& bias) override {
    const bool no_bias = std::none_of(bias.begin(), bias.end(), [](const Tensor* b) { return b && b->defined(); });
    if (no_bias)
      if (std::vector<Tensor> y = quant_linear_many(x_in, w); !y.empty()) return y;
    GemvSegments seg{};
    bool fused = !w.empty() && w.size() <= 3;
    for (size_t i = 0; fused && i < w.size(); ++i) {
      fused = gemv_fits(x_in, *w[i]) && !(i < bias.size() && bias[i] && bias[i]->defined());
      if (fused) {
        seg.w[i] = w[i]->data.raw();
        seg.ldw[i] = w[i]->data.stride(0);
        seg.m[i] = w[i]->rows();
      }
    }
    seg.count = static_cast<int>(w.size());
    if (!fused || !gemv_bf16_multi_applies(seg, rows_of(x_in), x_in.dim(-1))) {
      if (std::vector<Tensor> y = gemms_on_one_input(x_in, w, bias); !y.empty()) return y;
      return Backend::linear_many(x_in, w, bias);
    }
    Tensor x = dev_f32(x_in);
    std::vector<Tensor> out;
    for (size_t i = 0; i < w.size(); ++i) {
      std::vector<int64_t> shape = x.shape().vec();
      shape.back() = seg.m[i];
      out.push_back(Tensor::empty(Shape(shape), DType::F32, Device::CUDA));
      seg.y[i] = out.back().data<float>();
    }
    launch_gemv_bf16_multi(seg, x.data<float>(), rows_of(x), x.dim(-1));
    return out;
  }

  // Dense weights of one type that all take cuBLAS (prefill rows): x is cast
  // to their type once for all of them rather than once per matrix. Empty
  // when that does not apply.
  std::vector<Tensor> gemms_on_one_input(const Tensor& x_in, const std::vector<const Weight*>& w,
                                         const std::vector<const Tensor*>& bias) {
    if (w.empty()) return {};
    for (const Weight* wi : w)
      if (wi->is_affine() || is_quantized(wi->dtype()) || wi->dtype() != w[0]->dtype() || gemv_fits(x_in, *wi) ||
          wi->data.device() != Device::CUDA || wi->data.stride(1) != 1 || wi->cols() != x_in.dim(-1))
        return {};
    Tensor x = dev_f32(x_in);
    const Tensor xin = gemm_input(x, w[0]->dtype());
    const int64_t n = rows_of(x), k = x.dim(-1);
    std::vector<Tensor> out;
    for (size_t i = 0; i < w.size(); ++i) {
      std::vector<int64_t> shape = x.shape().vec();
      shape.back() = w[i]->rows();
      Tensor y = Tensor::empty(Shape(shape), DType::F32, Device::CUDA);
      gemm_cast(xin, *w[i], y, n, w[i]->rows(), k);
      if (i < bias.size() && bias[i] && bias[i]->defined()) {
        Tensor b = dev_f32(*bias[i]);
        launch_add_bias(y.data<float>(), b.data<float>(), n, w[i]->rows());
      }
      out.push_back(std::move(y));
    }
    return out;
  }

  // True when linear(x, w) would take the decode GEMV.
  static bool gemv_fits(const Tensor& x, const Weight& w) {
    if (w.is_affine() || w.dtype() != DType::BF16 || x.device() != Device::CUDA ||
        x.dtype() != DType::F32 || !x.is_contiguous() || w.data.device() != Device::CUDA || w.data.stride(1) != 1 ||
        w.cols() != x.dim(-1))
      return false;
    return gemv_bf16_applies(w.data.raw(), w.data.stride(0), x.data<float>(), rows_of(x), x.dim(-1));
  }

  // cuBLAS: x rounded to the weight type, float32 accumulation. gemm_input
  // gives x in the weight's type (x itself for float32 weights).
  static Tensor gemm_input(const Tensor& x, DType wt) {
    if (wt == DType::F32) return x;
    Tensor xin = Tensor::empty(x.shape(), wt, Device::CUDA);
    launch_cast(x.raw(), DType::F32, xin.raw(), wt, x.numel());
    return xin;
  }

  static void gemm(const Tensor& x, const Weight& w, Tensor& y, int64_t n, int64_t m, int64_t k) {
    gemm_cast(gemm_input(x, w.dtype()), w, y, n, m, k);
  }

  // y = xin · Wᵀ for xin already in the weight's type.
  static void gemm_cast(const Tensor& xin, const Weight& w, Tensor& y, int64_t n, int64_t m, int64_t k) {
    const DType wt = w.dtype();
    const float one = 1.0f, zero = 0.0f;
    // Row-major y[n,m] = x[n,k] · W[m,k]ᵀ is column-major yᵀ[m,n] = Wᵀᵀ·xᵀ.
    CUBLAS_OK(cublasGemmEx(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
                           static_cast<int>(k), &one, w.data.raw(), cuda_type(wt), static_cast<int>(w.data.stride(0)),
                           xin.raw(), cuda_type(wt), static_cast<int>(k), &zero, y.raw(), CUDA_R_32F,
                           static_cast<int>(m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  Tensor matmul(const Tensor& a_in, const Tensor& b_in) override {
    Tensor a = dev_f32(a_in), b = dev_f32(b_in);
    const int64_t n = a.dim(0), k = a.dim(1), m = b.dim(1);
    Tensor y = Tensor::empty({n, m}, DType::F32, Device::CUDA);
    const float one = 1.0f, zero = 0.0f;
    // Column-major yᵀ[m,n] = bᵀ[m,k] · aᵀ[k,n].
    CUBLAS_OK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
                          static_cast<int>(k), &one, b.data<float>(), static_cast<int>(m), a.data<float>(),
                          static_cast<int>(k), &zero, y.data<float>(), static_cast<int>(m)));
    return y;
  }

  Tensor embedding(const Weight& table, const Tensor& ids_in) override {
    if (table.is_affine() || is_quantized(table.dtype())) return quant_embedding(table, ids_in);
    Tensor ids = ids_in.to(Device::CUDA).contiguous();
    const int64_t n = ids.numel(), d = table.cols();
    Tensor out = Tensor::empty({n, d}, DType::F32, Device::CUDA);
    launch_embedding(table.data.raw(), table.dtype(), table.data.stride(0), ids.data<int32_t>(), n, d,
                     out.data<float>());
    return out;
  }

  Tensor rms_norm(const Tensor& x_in, const Tensor& w_in, float eps, bool unit) override {
    Tensor x = dev_f32(x_in), w = dev_f32(w_in);
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_rms_norm(x.data<float>(), w.data<float>(), y.data<float>(), rows_of(x), x.dim(-1), eps, unit);
    return y;
  }

  Tensor layer_norm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, float eps) override {
    Tensor x = dev_f32(x_in), w = dev_f32(w_in);
    Tensor b = b_in.defined() ? dev_f32(b_in) : Tensor();
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_layer_norm(x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr, y.data<float>(),
                      rows_of(x), x.dim(-1), eps);
    return y;
  }

  void rope_pair_inplace(Tensor& a, Tensor& b, const Tensor& positions, const RopeSpec& spec) override {
    auto fits = [](const Tensor& x) {
      return x.device() == Device::CUDA && x.dtype() == DType::F32 && x.is_contiguous() && x.ndim() == 3;
    };
    if (!fits(a) || !fits(b) || a.dim(0) != b.dim(0) || a.dim(2) != b.dim(2))
      return Backend::rope_pair_inplace(a, b, positions, spec);
    Tensor pos = positions.to(Device::CUDA).contiguous();
    launch_rope_pair(a.data<float>(), a.dim(1), b.data<float>(), b.dim(1), pos.data<int32_t>(), a.dim(0), a.dim(2),
                     spec);
  }

  void rope_inplace(Tensor& x, const Tensor& positions, const RopeSpec& spec) override {
    INGOT_CHECK(x.device() == Device::CUDA && x.dtype() == DType::F32 && x.is_contiguous() && x.ndim() == 3);
    Tensor pos = positions.to(Device::CUDA).contiguous();
    launch_rope(x.data<float>(), pos.data<int32_t>(), x.dim(0), x.dim(1), x.dim(2), spec);
  }

  Tensor softmax(const Tensor& x_in) override {
    Tensor x = dev_f32(x_in);
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_softmax(x.data<float>(), y.data<float>(), rows_of(x), x.dim(-1));
    return y;
  }

  Tensor unary(UnaryOp op, const Tensor& x_in) override {
    Tensor x = dev_f32(x_in);
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_unary(op, x.data<float>(), y.data<float>(), x.numel());
    return y;
  }

  Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in) override {
    Tensor a = dev_f32(a_in), b = dev_f32(b_in);
    INGOT_CHECK(b.numel() > 0 && a.numel() % b.numel() == 0, "binary op shapes ", a.describe(), " ", b.describe());
    Tensor y = Tensor::empty(a.shape(), DType::F32, Device::CUDA);
    launch_binary(op, a.data<float>(), b.data<float>(), y.data<float>(), a.numel(), b.numel());
    return y;
  }

  Tensor glu(GluOp op, const Tensor& g_in, const Tensor& u_in) override {
    Tensor g = dev_f32(g_in), u = dev_f32(u_in);
    INGOT_CHECK(g.shape() == u.shape());
    Tensor y = Tensor::empty(g.shape(), DType::F32, Device::CUDA);
    launch_glu(op, g.data<float>(), u.data<float>(), y.data<float>(), g.numel());
    return y;
  }

  Tensor scale(const Tensor& x_in, float s) override {
    Tensor x = dev_f32(x_in);
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_scale(x.data<float>(), y.data<float>(), x.numel(), s, 0.0f);
    return y;
  }

  Tensor softcap(const Tensor& x_in, float cap) override {
    Tensor x = dev_f32(x_in);
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_scale(x.data<float>(), y.data<float>(), x.numel(), 1.0f, cap);
    return y;
  }

  Tensor attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttnParams& p) override {
    Tensor q = dev_f32(q_in);
    Tensor k = k_in.to(Device::CUDA).contiguous(), v = v_in.to(Device::CUDA).contiguous();
    if (k.dtype() != DType::F32 && k.dtype() != DType::BF16) k = dev_f32(k);
    if (v.dtype() != k.dtype()) v = k.dtype() == DType::F32 ? dev_f32(v) : cast(v, k.dtype());
    const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2), s = k.dim(0), kvh = k.dim(1), dv = v.dim(2);
    INGOT_CHECK(k.dim(2) == d && v.dim(0) == s && h % kvh == 0);
    Tensor out = Tensor::empty({t, h, dv}, DType::F32, Device::CUDA);
    launch_attention(q.data<float>(), k.raw(), v.raw(), k.dtype(), out.data<float>(), t, h, d, s, kvh, dv, p);
    return out;
  }

  // ---- Ops of the hybrid and MoE families (kernels.cu, recurrent.cu). Recurrent
  // states must already live on the device as float32: they are updated in place.
  Tensor l2_norm(const Tensor& x_in, float eps) override {
    Tensor x = dev_f32(x_in);
    if (x.ndim() < 1) fail(ErrorKind::InvalidArgument, "l2_norm of a scalar ", x.describe());
    Tensor y = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    launch_l2_norm(x.data<float>(), y.data<float>(), rows_of(x), x.dim(-1), eps);
    return y;
  }

  Tensor causal_conv1d(const Tensor& x_in, const Tensor& w_in, Tensor& state) override {
    Tensor x = dev_f32(x_in), w = dev_f32(w_in);
    if (x.ndim() != 2 || w.ndim() != 2 || w.dim(0) != x.dim(1) || w.dim(1) < 1)
      fail(ErrorKind::InvalidArgument, "causal_conv1d: x ", x.describe(), " w ", w.describe(),
           " (want x [T, C], w [C, K])");
    const int64_t T = x.dim(0), C = x.dim(1), K = w.dim(1);
    check_state(state, {K - 1, C}, "causal_conv1d");
    Tensor y = Tensor::empty({T, C}, DType::F32, Device::CUDA);
    launch_causal_conv1d(x.data<float>(), w.data<float>(), state.data<float>(), y.data<float>(), T, C, K);
    return y;
  }

  Tensor gated_delta_rule(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& g_in,
                          const Tensor& beta_in, Tensor& state, DeltaRuleForm form) override {
    Tensor q = dev_f32(q_in), k = dev_f32(k_in), v = dev_f32(v_in), g = dev_f32(g_in), beta = dev_f32(beta_in);
    if (q.ndim() != 3 || v.ndim() != 3 || k.shape() != q.shape() || v.dim(0) != q.dim(0) || q.dim(1) == 0 ||
        v.dim(1) % q.dim(1) != 0 || g.numel() != v.dim(0) * v.dim(1) || beta.numel() != g.numel())
      fail(ErrorKind::InvalidArgument, "gated_delta_rule: q ", q.describe(), " k ", k.describe(), " v ",
           v.describe(), " g ", g.describe(), " beta ", beta.describe(),
           " (want q, k [T, Hk, Dk], v [T, Hv, Dv], g and beta [T, Hv], Hv % Hk == 0)");
    const int64_t T = q.dim(0), hk = q.dim(1), dk = q.dim(2), hv = v.dim(1), dv = v.dim(2);
    check_state(state, {hv, dk, dv}, "gated_delta_rule");
    const bool chunked = form == DeltaRuleForm::Chunked || (form == DeltaRuleForm::Auto && T > 1);
    Tensor out = Tensor::empty({T, hv, dv}, DType::F32, Device::CUDA);
    launch_gated_delta_rule(q.data<float>(), k.data<float>(), v.data<float>(), g.data<float>(), beta.data<float>(),
                            state.data<float>(), out.data<float>(), T, hk, hv, dk, dv, chunked);
    return out;
  }

  void scatter_add_rows(Tensor& dst, const Tensor& src_in, const std::vector<int64_t>& rows,
                        const std::vector<float>& weights) override {
    if (dst.device() != Device::CUDA || dst.dtype() != DType::F32 || !dst.is_contiguous() || dst.ndim() != 2)
      fail(ErrorKind::InvalidArgument, "scatter_add_rows: dst ", dst.describe(), " (want float32 [N, D] on cuda)");
    Tensor src = dev_f32(src_in);
    const int64_t n = dst.dim(0), d = dst.dim(1), len = static_cast<int64_t>(rows.size());
    if (src.numel() != len * d || weights.size() != rows.size())
      fail(ErrorKind::InvalidArgument, "scatter_add_rows: src ", src.describe(), " for ", len, " rows of ", d,
           " with ", weights.size(), " weights");
    std::vector<int64_t> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    if (len && (sorted.front() < 0 || sorted.back() >= n))
      fail(ErrorKind::InvalidArgument, "scatter_add_rows: row out of range [0, ", n, ")");
    const bool unique = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    if (len == 0) return;
    Tensor drows = Tensor::empty({len}, DType::I64, Device::CUDA);
    Tensor dw = Tensor::empty({len}, DType::F32, Device::CUDA);
    device_copy(drows.raw(), Device::CUDA, rows.data(), Device::CPU, rows.size() * sizeof(int64_t));
    device_copy(dw.raw(), Device::CUDA, weights.data(), Device::CPU, weights.size() * sizeof(float));
    launch_scatter_add_rows(dst.data<float>(), src.data<float>(), drows.data<int64_t>(), dw.data<float>(), len, d,
                            unique);
  }

  // Decode-sized batches in one launch per output (low_rank.h); the rest as
  // composed by default.
  void low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x_in) override {
    Tensor x;  // x_in as float32 on the device, made once for all the outputs
    for (const LowRankOutput& out : outs) {
      Tensor& y = *out.y;
      LowRankJobs jobs;
      DType dt = DType::F32;
      if (y.device() != Device::CUDA || y.dtype() != DType::F32 || !y.is_contiguous() || y.ndim() != 2 ||
          x_in.ndim() != 2 || x_in.dim(0) != y.dim(0) ||
          !plan_low_rank(y.dim(0), x_in.dim(1), y.dim(1), out.groups, Device::CUDA, &jobs, &dt)) {
        Backend::low_rank_add({out}, x_in);
        continue;
      }
      if (!x.defined()) x = dev_f32(x_in);
      if (!aligned16(x.raw()) || !aligned16(y.raw())) {  // the kernel reads and writes 16-byte pieces
        Backend::low_rank_add({out}, x_in);
        continue;
      }
      launch_low_rank_add(jobs, dt, x.data<float>(), y.data<float>(), x.dim(1), y.dim(1));
    }
  }

  // A recurrent state updated in place: float32, contiguous, on the device, of `shape`.
  static void check_state(const Tensor& state, const Shape& shape, const char* op) {
    if (!state.defined() || state.device() != Device::CUDA || state.dtype() != DType::F32 || !state.is_contiguous() ||
        state.shape() != shape)
      fail(ErrorKind::InvalidArgument, op, ": state ", state.defined() ? state.describe() : std::string("undefined"),
           " (want contiguous float32 ", shape.str(), " on cuda)");
  }

  Tensor argmax(const Tensor& logits) override {
    Tensor l = dev_f32(logits);
    const int64_t n = rows_of(l);
    Tensor out = Tensor::empty({n}, DType::I32, Device::CUDA);
    launch_argmax(l.data<float>(), out.data<int32_t>(), n, l.dim(-1));
    return out;
  }

  Tensor cast(const Tensor& x_in, DType dt) override {
    Tensor x = x_in.to(Device::CUDA).contiguous();
    if (x.dtype() == dt) return x;
    Tensor y = Tensor::empty(x.shape(), dt, Device::CUDA);
    launch_cast(x.raw(), x.dtype(), y.raw(), dt, x.numel());
    return y;
  }

  Tensor gather_rows(const Tensor& x_in, const std::vector<int64_t>& rows) override {
    Tensor x = x_in.to(Device::CUDA).contiguous();
    std::vector<int64_t> shape = x.shape().vec();
    const int64_t n = shape[0];
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor out = Tensor::empty(Shape(shape), x.dtype(), Device::CUDA);
    for (int64_t r : rows) INGOT_CHECK(r >= 0 && r < n);
    Tensor idx = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::I64, Device::CUDA);
    device_copy(idx.raw(), Device::CUDA, rows.data(), Device::CPU, rows.size() * sizeof(int64_t));
    launch_gather_rows(x.raw(), out.raw(), idx.data<int64_t>(), static_cast<int64_t>(rows.size()),
                       n ? static_cast<int64_t>(x.nbytes()) / n : 0);
    return out;
  }

  std::unique_ptr<StepGraph> capture_step(const std::function<void()>& step) override { return capture(step); }

  void write_rows_at_pair(Tensor& dst0, const Tensor& src0, Tensor& dst1, const Tensor& src1,
                          const Tensor& rows_in) override {
    auto fits = [](const Tensor& d, const Tensor& s) {
      return d.device() == Device::CUDA && d.is_contiguous() && d.ndim() >= 1 && d.dtype() == DType::BF16 &&
             s.device() == Device::CUDA && s.dtype() == DType::F32 && s.is_contiguous() && s.ndim() >= 1 &&
             d.dim(0) > 0 && s.dim(0) > 0 && s.numel() / s.dim(0) == d.numel() / d.dim(0);
    };
    if (!fits(dst0, src0) || !fits(dst1, src1) || dst0.dim(0) != dst1.dim(0) ||
        src0.dim(0) != src1.dim(0) || dst0.numel() != dst1.numel())
      return Backend::write_rows_at_pair(dst0, src0, dst1, src1, rows_in);
    Tensor rows = rows_in.to(Device::CUDA).contiguous();
    INGOT_CHECK(rows.dtype() == DType::I32 && rows.numel() == src0.dim(0), "write_rows_at_pair: ", rows.describe());
    launch_write_rows_pair_f32_bf16(dst0.raw(), src0.data<float>(), dst1.raw(), src1.data<float>(),
                                    rows.data<int32_t>(), src0.dim(0), dst0.numel() / dst0.dim(0), dst0.dim(0));
  }

  void write_rows_at(Tensor& dst, const Tensor& src_in, const Tensor& rows_in) override {
    INGOT_CHECK(dst.device() == Device::CUDA && dst.is_contiguous() && dst.ndim() >= 1);
    Tensor src = src_in.to(Device::CUDA).contiguous();
    Tensor rows = rows_in.to(Device::CUDA).contiguous();
    INGOT_CHECK(rows.dtype() == DType::I32 && rows.numel() == src.dim(0) && src.numel() % std::max<int64_t>(1, src.dim(0)) == 0,
                "write_rows_at: ", src.describe(), " into ", dst.describe(), " at ", rows.describe());
    const int64_t n = dst.dim(0);
    if (src.dtype() == DType::F32 && dst.dtype() == DType::BF16) {  // the K/V cast fused into the write
      const int64_t row_elems = n ? dst.numel() / n : 0;
      INGOT_CHECK(src.dim(0) == 0 || src.numel() / src.dim(0) == row_elems, "write_rows_at: row sizes differ");
      launch_write_rows_at_f32_bf16(dst.raw(), src.data<float>(), rows.data<int32_t>(), src.dim(0), row_elems, n);
      return;
    }
    if (src.dtype() != dst.dtype()) src = cast(src, dst.dtype());
    const int64_t row_bytes = n ? static_cast<int64_t>(dst.nbytes()) / n : 0;
    INGOT_CHECK(src.dim(0) == 0 || static_cast<int64_t>(src.nbytes()) / src.dim(0) == row_bytes,
                "write_rows_at: row sizes differ");
    launch_write_rows_at(dst.raw(), src.raw(), rows.data<int32_t>(), src.dim(0), row_bytes, n);
  }

  void add_i32_inplace(Tensor& x, int32_t v) override {
    INGOT_CHECK(x.device() == Device::CUDA && x.dtype() == DType::I32 && x.is_contiguous());
    launch_add_i32(x.data<int32_t>(), x.numel(), v);
  }

  Tensor concat_rows(const std::vector<Tensor>& parts) override {
    std::vector<int64_t> shape = parts.at(0).shape().vec();
    int64_t total = 0;
    for (const Tensor& p : parts) total += p.dim(0);
    shape[0] = total;
    Tensor out = Tensor::empty(Shape(shape), parts[0].dtype(), Device::CUDA);
    size_t off = 0;
    for (const Tensor& p : parts) {
      Tensor c = p.to(Device::CUDA).contiguous();
      CUDA_OK(cudaMemcpyAsync(static_cast<uint8_t*>(out.raw()) + off, c.raw(), c.nbytes(), cudaMemcpyDeviceToDevice,
                              stream()));
      off += c.nbytes();
    }
    return out;
  }
};

}  // namespace

Backend* backend() {
  static CudaBackend* b = [] {
    log_tuning();  // the device's settings, once, when the backend comes up
    return new CudaBackend();
  }();
  return b;
}

}  // namespace ingot::cuda
