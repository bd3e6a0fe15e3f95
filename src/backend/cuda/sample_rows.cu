// sample_rows on the device: the host twin (sampling/row_sampler.cpp) step
// for step, with the sequential parts (a draw over the chunk sums or the
// sorted top-k candidates) on thread 0 through the same sample_math code.
#include <cfloat>
#include <climits>
#include <cstring>

#include "backend/cuda/runtime.h"
#include "backend/cuda/sample_rows_cuda.h"

namespace ingot::cuda {

namespace {

using namespace sample_math;

constexpr int kBlock = kSampleChunks;  // one chunk of an unfiltered draw per thread
static_assert(kBlock == 1024, "the kernel's block is one thread per chunk");

struct Best {
  float v;
  int32_t id;
};

// (value desc, id asc): the order of greedy ties, top-k and top_logprobs.
__device__ inline Best better(Best a, Best b) { return (b.v > a.v || (b.v == a.v && b.id < a.id)) ? b : a; }

__device__ Best block_best(Best b) {
  __shared__ Best warp_best[32];
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffff, b.v, o), __shfl_xor_sync(0xffffffff, b.id, o)};
    b = better(b, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  b = warp_best[0];
  for (int w = 1; w < blockDim.x / 32; ++w) b = better(b, warp_best[w]);
  return b;
}

__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  v = warp_max[0];
  for (int w = 1; w < blockDim.x / 32; ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

__device__ float block_sum(float v) {
  __shared__ float warp_sum[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sum[warp] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < blockDim.x / 32; ++w) v += warp_sum[w];
  return v;
}

// Log-sum-exp of a row; every thread gets it.
__device__ float row_lse(const float* x, int64_t v) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m);
  float s = 0;
  if (m > -INFINITY)
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) s += expf(x[j] - m);
  return m + logf(block_sum(s));
}

// The best (x[j] - shift, j) ranking after (pv, pid); NaN counts as -inf
// when `nan_low`. id INT_MAX when nothing ranks after.
__device__ Best next_best(const float* x, int64_t v, float shift, bool nan_low, float pv, int32_t pid) {
  Best b{-INFINITY, INT_MAX};
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    float y = x[j] - shift;
    if (nan_low && isnan(y)) y = -INFINITY;
    const int32_t id = static_cast<int32_t>(j);
    if (ranks_after(y, id, pv, pid)) b = better(b, Best{y, id});
  }
  return block_best(b);
}

// Output layout per row: token, logprob, then kSampleMaxTopLogprobs ids and
// as many logprobs (4-byte words).
constexpr int kOutWords = 2 + 2 * kSampleMaxTopLogprobs;

__global__ void __launch_bounds__(kBlock) sample_rows_kernel(const float* logits, int64_t v, const SampleRow* rows,
                                                            const LogitEdit* edits, float* work, uint32_t* out) {
  const int64_t i = blockIdx.x;
  const SampleRow r = rows[i];
  const float* raw = logits + i * v;
  const float* x = raw;
  if (r.edit_count > 0) {
    float* w = work + i * v;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) w[j] = raw[j];
    __syncthreads();
    // Ids are unique within a row: each edit has its own thread.
    for (int e = threadIdx.x; e < r.edit_count; e += blockDim.x) {
      const LogitEdit ed = edits[r.edit_begin + e];
      w[ed.id] = apply_edit(w[ed.id], ed, r);
    }
    __syncthreads();
    x = w;
  }
  __shared__ int32_t tok;
  __shared__ double parts[kBlock];
  __shared__ float cand_v[kSampleMaxTopK];
  __shared__ int32_t cand_id[kSampleMaxTopK];
  if (r.temperature == 0.0f) {
    // PARITY.md greedy: argmax of (x - lse), lowest id on ties, 0 when lse is not finite.
    const float lse = row_lse(x, v);
    const Best b = next_best(x, v, lse, false, INFINITY, -1);
    if (threadIdx.x == 0) tok = (!isfinite(lse) || b.id == INT_MAX) ? 0 : b.id;
  } else {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, x[j]);
    const float mx = block_max(m);
    const float inv_t = 1.0f / r.temperature;
    const double u01 = uniform(r.seed, r.step);
    if (!isfinite(mx)) {
      if (threadIdx.x == 0) tok = 0;
    } else if (r.top_k == 0) {
      const int64_t len = chunk_len(v), lo = min(v, threadIdx.x * len), hi = min(v, lo + len);
      parts[threadIdx.x] = chunk_sum(x, lo, hi, mx, inv_t);
      __syncthreads();
      if (threadIdx.x == 0) tok = draw_chunked(x, v, mx, inv_t, parts, u01);
    } else {
      float pv = INFINITY;
      int32_t pid = -1;
      int n = 0;
      for (; n < r.top_k; ++n) {
        const Best b = next_best(x, v, 0.0f, false, pv, pid);
        if (b.id == INT_MAX) break;
        if (threadIdx.x == 0) {
          cand_v[n] = b.v;
          cand_id[n] = b.id;
        }
        pv = b.v;
        pid = b.id;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        float prob[kSampleMaxTopK];
        double sum = 0;
        for (int c = 0; c < n; ++c) {
          prob[c] = weight(cand_v[c], mx, inv_t);
          sum += prob[c];
        }
        tok = cand_id[pick_sorted(prob, n, sum, r.top_p, r.min_p, u01)];
      }
    }
  }
  __syncthreads();
  const int32_t t = tok;
  uint32_t* o = out + i * kOutWords;
  if (threadIdx.x == 0) o[0] = static_cast<uint32_t>(t);
  if (!r.logprob) return;
  const float lse = row_lse(raw, v);
  const bool finite = isfinite(lse);
  if (threadIdx.x == 0) {
    o[1] = __float_as_uint(finite ? raw[t] - lse : -INFINITY);
  }
  // top_logprobs: (raw - lse) desc, id asc; NaN and a non-finite lse count as -inf.
  float pv = INFINITY;
  int32_t pid = -1;
  for (int k = 0; k < r.top_logprobs && k < v; ++k) {
    Best b = finite ? next_best(raw, v, lse, true, pv, pid) : next_best(raw, v, INFINITY, true, pv, pid);
    if (threadIdx.x == 0) {
      o[2 + k] = static_cast<uint32_t>(b.id);
      o[2 + kSampleMaxTopLogprobs + k] = __float_as_uint(b.v);
    }
    pv = b.v;
    pid = b.id;
  }
}

}  // namespace

SampledRows sample_rows_cuda(const Tensor& logits_in, const SampleRowsPlan& plan) {
  Tensor logits = logits_in.contiguous();
  INGOT_CHECK(logits.dtype() == DType::F32 && logits.device() == Device::CUDA,
              "sample_rows_cuda: want float32 logits on cuda, got ", logits.describe());
  const int64_t n = logits.dim(0), v = logits.dim(1);
  SampledRows res;
  if (n == 0) return res;
  // Rows and edits go up in one copy.
  const size_t rows_bytes = plan.rows.size() * sizeof(SampleRow);
  const size_t edits_at = (rows_bytes + 15) / 16 * 16;
  const size_t bytes = edits_at + plan.edits.size() * sizeof(LogitEdit);
  std::vector<uint8_t> packed(bytes);
  std::memcpy(packed.data(), plan.rows.data(), rows_bytes);
  if (!plan.edits.empty()) std::memcpy(packed.data() + edits_at, plan.edits.data(), plan.edits.size() * sizeof(LogitEdit));
  Tensor dplan = Tensor::empty({static_cast<int64_t>(bytes)}, DType::U8, Device::CUDA);
  device_copy(dplan.raw(), Device::CUDA, packed.data(), Device::CPU, bytes);
  bool edited = false;
  for (const SampleRow& r : plan.rows) edited |= r.edit_count > 0;
  Tensor work = edited ? Tensor::empty({n, v}, DType::F32, Device::CUDA) : Tensor();
  Tensor out = Tensor::zeros({n, kOutWords}, DType::I32, Device::CUDA);
  auto* base = static_cast<const uint8_t*>(dplan.raw());
  sample_rows_kernel<<<static_cast<unsigned>(n), kBlock, 0, stream()>>>(
      logits.data<float>(), v, reinterpret_cast<const SampleRow*>(base),
      reinterpret_cast<const LogitEdit*>(base + edits_at), edited ? work.data<float>() : nullptr,
      static_cast<uint32_t*>(out.raw()));
  CUDA_LAUNCH_OK();
  std::vector<uint32_t> host(static_cast<size_t>(n) * kOutWords);
  device_copy(host.data(), Device::CPU, out.raw(), Device::CUDA, host.size() * 4);
  res.token.resize(static_cast<size_t>(n));
  res.logprob.resize(static_cast<size_t>(n));
  res.top_id.resize(static_cast<size_t>(n) * kSampleMaxTopLogprobs);
  res.top_logprob.resize(static_cast<size_t>(n) * kSampleMaxTopLogprobs);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t* o = host.data() + i * kOutWords;
    res.token[static_cast<size_t>(i)] = static_cast<int32_t>(o[0]);
    std::memcpy(&res.logprob[static_cast<size_t>(i)], &o[1], 4);
    for (int k = 0; k < kSampleMaxTopLogprobs; ++k) {
      res.top_id[static_cast<size_t>(i) * kSampleMaxTopLogprobs + k] = static_cast<int32_t>(o[2 + k]);
      std::memcpy(&res.top_logprob[static_cast<size_t>(i) * kSampleMaxTopLogprobs + k],
                  &o[2 + kSampleMaxTopLogprobs + k], 4);
    }
  }
  return res;
}

}  // namespace ingot::cuda
