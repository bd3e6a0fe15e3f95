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

Backend& backend(Device d) {
  Backend* b = g_backends[static_cast<int>(d)];
  if (!b) fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available in this build");
  return *b;
}

}  // namespace ingot
