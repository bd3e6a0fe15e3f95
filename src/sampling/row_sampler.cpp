#include "sampling/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/ops.h"
#include "sampling/greedy.h"
#include "util/error.h"

namespace ingot::sampling {

using namespace sample_math;

void check_plan(const SampleRowsPlan& plan, int64_t n, int64_t v) {
  auto bad = [](auto&&... a) { fail(ErrorKind::InvalidArgument, "sample_rows: ", a...); };
  if (static_cast<int64_t>(plan.rows.size()) != n) bad(plan.rows.size(), " plan rows for ", n, " logits rows");
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) bad("vocabulary of ", v, " ids");
  for (const SampleRow& r : plan.rows) {
    if (r.edit_begin < 0 || r.edit_count < 0 ||
        static_cast<size_t>(r.edit_begin) + static_cast<size_t>(r.edit_count) > plan.edits.size())
      bad("edits [", r.edit_begin, ", +", r.edit_count, ") outside the ", plan.edits.size(), " given");
    if (r.top_k < 0 || r.top_k > std::min<int64_t>(kSampleMaxTopK, v)) bad("top_k ", r.top_k);
    if (r.top_logprobs < 0 || r.top_logprobs > kSampleMaxTopLogprobs) bad("top_logprobs ", r.top_logprobs);
    if (!(r.temperature >= 0)) bad("temperature ", r.temperature);
    for (int32_t e = 0; e < r.edit_count; ++e) {
      const int32_t id = plan.edits[static_cast<size_t>(r.edit_begin + e)].id;
      if (id < 0 || id >= v) bad("edit of id ", id, " outside the vocabulary of ", v);
    }
  }
}

namespace {

// The k best ids of x by (value desc, id asc), best first, found one at a
// time as the kernel finds them.
void top_candidates(const float* x, int64_t v, int k, std::vector<float>& val, std::vector<int32_t>& id) {
  val.clear();
  id.clear();
  float pv = std::numeric_limits<float>::infinity();
  int32_t pid = -1;
  for (int round = 0; round < k; ++round) {
    float bv = -std::numeric_limits<float>::infinity();
    int32_t bid = std::numeric_limits<int32_t>::max();
    for (int64_t j = 0; j < v; ++j) {
      const int32_t jj = static_cast<int32_t>(j);
      if (!ranks_after(x[j], jj, pv, pid)) continue;
      if (x[j] > bv || (x[j] == bv && jj < bid)) {
        bv = x[j];
        bid = jj;
      }
    }
    if (bid == std::numeric_limits<int32_t>::max()) break;
    val.push_back(bv);
    id.push_back(bid);
    pv = bv;
    pid = bid;
  }
}

int32_t draw_row(const float* x, int64_t v, const SampleRow& r, std::vector<float>& val, std::vector<int32_t>& id) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < v; ++j) mx = std::max(mx, x[j]);
  if (!std::isfinite(mx)) return 0;
  const float inv_t = 1.0f / r.temperature;
  const double u01 = uniform(r.seed, r.step);
  if (r.top_k == 0) {
    std::vector<double> parts(kSampleChunks, 0.0);
    const int64_t len = chunk_len(v);
    for (int c = 0; c < kSampleChunks; ++c) {
      const int64_t lo = std::min(v, c * len), hi = std::min(v, lo + len);
      parts[static_cast<size_t>(c)] = chunk_sum(x, lo, hi, mx, inv_t);
    }
    return draw_chunked(x, v, mx, inv_t, parts.data(), u01);
  }
  top_candidates(x, v, r.top_k, val, id);
  std::vector<float> prob(val.size());
  double sum = 0;
  for (size_t i = 0; i < val.size(); ++i) {
    prob[i] = weight(val[i], mx, inv_t);
    sum += prob[i];
  }
  return id[static_cast<size_t>(pick_sorted(prob.data(), static_cast<int>(prob.size()), sum, r.top_p, r.min_p, u01))];
}

}  // namespace

SampledRows sample_rows_host(const float* logits, int64_t n, int64_t v, const SampleRowsPlan& plan) {
  check_plan(plan, n, v);
  SampledRows out;
  out.token.assign(static_cast<size_t>(n), 0);
  out.logprob.assign(static_cast<size_t>(n), 0.0f);
  out.top_id.assign(static_cast<size_t>(n) * kSampleMaxTopLogprobs, 0);
  out.top_logprob.assign(static_cast<size_t>(n) * kSampleMaxTopLogprobs, 0.0f);
  std::vector<float> work, val;
  std::vector<int32_t> id;
  for (int64_t i = 0; i < n; ++i) {
    const SampleRow& r = plan.rows[static_cast<size_t>(i)];
    const float* raw = logits + i * v;
    const float* x = raw;
    if (r.edit_count > 0) {
      work.assign(raw, raw + v);
      for (int32_t e = 0; e < r.edit_count; ++e) {
        const LogitEdit& ed = plan.edits[static_cast<size_t>(r.edit_begin + e)];
        work[static_cast<size_t>(ed.id)] = apply_edit(work[static_cast<size_t>(ed.id)], ed, r);
      }
      x = work.data();
    }
    const int32_t tok = r.temperature == 0.0f ? greedy_token(x, v) : draw_row(x, v, r, val, id);
    out.token[static_cast<size_t>(i)] = tok;
    if (!r.logprob) continue;
    const float lse = row_logsumexp(raw, v);
    out.logprob[static_cast<size_t>(i)] = std::isfinite(lse) ? raw[tok] - lse : -std::numeric_limits<float>::infinity();
    const auto top = top_logprobs(raw, v, r.top_logprobs, lse);
    for (size_t j = 0; j < top.size(); ++j) {
      out.top_id[static_cast<size_t>(i) * kSampleMaxTopLogprobs + j] = top[j].token;
      out.top_logprob[static_cast<size_t>(i) * kSampleMaxTopLogprobs + j] = top[j].logprob;
    }
  }
  return out;
}

SampledRows sample_rows(const Tensor& logits, const SampleRowsPlan& plan) {
  INGOT_CHECK(logits.ndim() == 2, "sample_rows: logits must be [rows, vocab], got ", logits.describe());
  const int64_t n = logits.dim(0), v = logits.dim(1);
  check_plan(plan, n, v);
  if (logits.device() != Device::CPU)
    if (RowSamplerFn on_device = row_sampler(logits.device()))
      return on_device(logits.dtype() == DType::F32 ? logits : ops::cast(logits, DType::F32), plan);
  const Tensor host = logits.to(Device::CPU).to(DType::F32).contiguous();
  return sample_rows_host(host.data<float>(), n, v, plan);
}

}  // namespace ingot::sampling
