// Token picks through the batched row sampler (sampling/row_sampler.h): on a
// GPU the logits stay there and only ids (and the logprobs asked for) come
// back; rows it does not cover are copied to the host and sampled there.
#include "engine/engine_impl.h"
#include "ops/ops.h"
#include "sampling/row_sampler.h"

namespace ingot::engine {

std::vector<std::optional<sampling::Sampled>> EngineImpl::pick_batched(const Tensor& logits,
                                                                      const std::vector<Sequence*>& rows,
                                                                      const std::vector<bool>& samples) {
  const int64_t V = model_.vocab_size();
  std::vector<std::optional<sampling::Sampled>> picks(rows.size());
  SampleRowsPlan plan;
  std::vector<int64_t> batched, host;  // logits row (= rows index) of each
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!samples[i]) continue;
    if (rows[i]->sampler->plan_row(V, plan))
      batched.push_back(static_cast<int64_t>(i));
    else
      host.push_back(static_cast<int64_t>(i));
  }
  auto rows_of = [&](const std::vector<int64_t>& idx) {
    return static_cast<int64_t>(idx.size()) == logits.dim(0) ? logits : ops::gather_rows(logits, idx);
  };
  if (!batched.empty()) {
    const SampledRows out = sampling::sample_rows(rows_of(batched), plan);
    for (size_t k = 0; k < batched.size(); ++k) {
      const auto i = static_cast<size_t>(batched[k]);
      picks[i] = rows[i]->sampler->take(out, k);
    }
  }
  if (!host.empty()) {
    const Tensor h = rows_of(host).to(Device::CPU).to(DType::F32).contiguous();
    for (size_t k = 0; k < host.size(); ++k) {
      Sequence& s = *rows[static_cast<size_t>(host[k])];
      picks[static_cast<size_t>(host[k])] =
          s.sampler->sample(h.data<float>() + static_cast<int64_t>(k) * V, V, s.req.stop.max_tokens - s.generated);
    }
  }
  return picks;
}

}  // namespace ingot::engine
