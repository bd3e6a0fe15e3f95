#include "ops/backend.h"

#include "util/error.h"

namespace ingot {

namespace {
Backend* g_backends[2] = {nullptr, nullptr};
}

void register_backend(Device d, Backend* b) { g_backends[static_cast<int>(d)] = b; }

bool has_backend(Device d) { return g_backends[static_cast<int>(d)] != nullptr; }

Tensor Backend::l2_norm(const Tensor&, float) {
  fail(ErrorKind::Unsupported, "l2_norm is not implemented on ", device_name(device()));
}
Tensor Backend::causal_conv1d(const Tensor&, const Tensor&, Tensor&) {
  fail(ErrorKind::Unsupported, "causal_conv1d is not implemented on ", device_name(device()));
}
Tensor Backend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                                 DeltaRuleForm) {
  fail(ErrorKind::Unsupported, "gated_delta_rule is not implemented on ", device_name(device()));
}
void Backend::scatter_add_rows(Tensor&, const Tensor&, const std::vector<int64_t>&, const std::vector<float>&) {
  fail(ErrorKind::Unsupported, "scatter_add_rows is not implemented on ", device_name(device()));
}

void Backend::low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x) {
  for (const LowRankOutput& out : outs) {
    Tensor& y = *out.y;
    INGOT_CHECK(y.ndim() == 2 && x.ndim() == 2 && y.dim(0) == x.dim(0), "low_rank_add y ", y.describe(), " x ",
                x.describe());
    for (const LowRankGroup& g : out.groups) {
      INGOT_CHECK(g.a && g.bt && g.a->cols() == x.dim(1) && g.bt->cols() == y.dim(1) && g.bt->rows() == g.a->rows());
      std::vector<int64_t> rows = g.rows;
      if (rows.empty())
        for (int64_t r = 0; r < x.dim(0); ++r) rows.push_back(r);
      const bool every_row = g.rows.empty();
      Tensor shrunk = linear(every_row ? x : gather_rows(x, rows), *g.a, nullptr);  // [n, r]
      Tensor expanded = matmul(shrunk, g.bt->data);                          // [n, M]
      scatter_add_rows(y, expanded, rows, std::vector<float>(rows.size(), 1.0f));
    }
  }
}

Tensor Backend::linear_residual(const Tensor& x, const Weight& w, const Tensor* bias, const Tensor& residual) {
  return binary(BinaryOp::Add, residual, linear(x, w, bias));
}
Tensor Backend::glu_linear(GluOp op, const Tensor& x, const Weight& gate, const Weight& up, const Tensor* gate_bias,
                           const Tensor* up_bias) {
  return glu(op, linear(x, gate, gate_bias), linear(x, up, up_bias));
}

std::vector<Tensor> Backend::linear_many(const Tensor& x, const std::vector<const Weight*>& w,
                                         const std::vector<const Tensor*>& bias) {
  std::vector<Tensor> out;
  out.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) out.push_back(linear(x, *w[i], i < bias.size() ? bias[i] : nullptr));
  return out;
}

void Backend::rope_pair_inplace(Tensor& a, Tensor& b, const Tensor& positions, const RopeSpec& spec) {
  rope_inplace(a, positions, spec);
  rope_inplace(b, positions, spec);
}

std::unique_ptr<StepGraph> Backend::capture_step(const std::function<void()>&) { return nullptr; }
void Backend::write_rows_at(Tensor&, const Tensor&, const Tensor&) {
  fail(ErrorKind::Unsupported, "write_rows_at is not implemented on ", device_name(device()));
}
void Backend::write_rows_at_pair(Tensor& dst0, const Tensor& src0, Tensor& dst1, const Tensor& src1,
                                 const Tensor& rows) {
  write_rows_at(dst0, src0, rows);
  write_rows_at(dst1, src1, rows);
}
void Backend::add_i32_inplace(Tensor&, int32_t) {
  fail(ErrorKind::Unsupported, "add_i32_inplace is not implemented on ", device_name(device()));
}

Backend& backend(Device d) {
  Backend* b = g_backends[static_cast<int>(d)];
  if (!b) fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available in this build");
  return *b;
}

}  // namespace ingot
