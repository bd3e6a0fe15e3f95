// The CPU implementation of the op vocabulary (activations are float32).
#pragma once
#include "ops/backend.h"

namespace ingot::cpu {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  Weight prepare_weight(const Weight& w) override;
  Tensor linear(const Tensor& x, const Weight& w, const Tensor* bias) override;
  Tensor linear_bulk(const Tensor& x, const Weight& w, const Tensor* bias) override;
  std::vector<Tensor> linear_many(const Tensor& x, const std::vector<const Weight*>& w,
                                  const std::vector<const Tensor*>& bias) override;
  Tensor glu_linear(GluOp op, const Tensor& x, const Weight& gate, const Weight& up, const Tensor* gate_bias,
                    const Tensor* up_bias) override;
  Tensor matmul(const Tensor& a, const Tensor& b) override;
  Tensor embedding(const Weight& table, const Tensor& ids) override;
  Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool unit_offset) override;
  Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) override;
  void rope_inplace(Tensor& x, const Tensor& positions, const RopeSpec& spec) override;
  Tensor softmax(const Tensor& x) override;
  Tensor unary(UnaryOp op, const Tensor& x) override;
  Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) override;
  Tensor glu(GluOp op, const Tensor& gate, const Tensor& up) override;
  Tensor scale(const Tensor& x, float s) override;
  Tensor softcap(const Tensor& x, float cap) override;
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnParams& p) override;
  Tensor argmax(const Tensor& logits) override;
  Tensor cast(const Tensor& x, DType dtype) override;
  Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) override;
  Tensor concat_rows(const std::vector<Tensor>& parts) override;
  DType activation_dtype(DType) const override { return DType::F32; }
  // extra_ops.cpp
  Tensor l2_norm(const Tensor& x, float eps) override;
  Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state) override;
  Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                          Tensor& state, DeltaRuleForm form) override;
  void scatter_add_rows(Tensor& dst, const Tensor& src, const std::vector<int64_t>& rows,
                        const std::vector<float>& weights) override;
  // low_rank.cpp
  void low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x) override;
};

// The CPU backend (one per process), registered by runtime::init_backends().
Backend* backend();

// PARITY.md greedy choice for one float32 row; returns the chosen log-prob.
float greedy_argmax_row(const float* row, int64_t v, int64_t* out_id);

}  // namespace ingot::cpu
