#include "ops/sample_rows.h"

namespace ingot {

namespace {
RowSamplerFn g_samplers[2] = {nullptr, nullptr};
}

void register_row_sampler(Device d, RowSamplerFn fn) { g_samplers[static_cast<int>(d)] = fn; }
RowSamplerFn row_sampler(Device d) { return g_samplers[static_cast<int>(d)]; }

}  // namespace ingot
