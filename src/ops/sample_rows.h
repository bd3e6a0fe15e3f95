// Token selection for many logits rows at once, where the logits live: the
// plan a backend's sample_rows() runs (a CUDA kernel on the GPU, the host
// twin in sampling/row_sampler.cpp elsewhere), so only token ids and the
// logprobs asked for leave the device. The plan is built by
// sampling::SequenceSampler from exactly the state its own sample() uses;
// the arithmetic both sides must share lives here, compiled for host and
// device alike.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/dtype.h"

#if defined(__CUDACC__)
#define INGOT_HD __host__ __device__
#else
#define INGOT_HD
#endif

namespace ingot {

// The most top-k candidates (and top_logprobs) one plan row may ask for; a
// request past it is sampled on the host.
constexpr int kSampleMaxTopK = 64;
constexpr int kSampleMaxTopLogprobs = 20;
// Unfiltered draws sum the row in this many contiguous chunks (one per thread
// of the device kernel; the host twin chunks the same way).
constexpr int kSampleChunks = 1024;

// One id of one row whose logit is changed before selection, in the order of
// SequenceSampler::process: + bias, then the repetition penalty, then
// presence + frequency * count.
struct LogitEdit {
  int32_t id = 0;
  int32_t count = 0;   // times generated so far (presence / frequency)
  float bias = 0;
  uint8_t has_bias = 0;
  uint8_t repeat = 0;  // seen in prompt or output: repetition penalty applies
};

struct SampleRow {
  float temperature = 0;  // 0: greedy (PARITY.md)
  int32_t top_k = 0;      // 0, or 1..kSampleMaxTopK
  float top_p = 1, min_p = 0;
  float repetition_penalty = 1, presence_penalty = 0, frequency_penalty = 0;
  uint64_t seed = 0, step = 0;
  int32_t edit_begin = 0, edit_count = 0;  // into SampleRowsPlan::edits
  int32_t top_logprobs = 0;               // 0..kSampleMaxTopLogprobs
  uint8_t logprob = 0;                    // report the chosen token's logprob
};

struct SampleRowsPlan {
  std::vector<SampleRow> rows;  // one per logits row, in order
  std::vector<LogitEdit> edits;
};

// What comes back to the host: token[i], logprob[i] (when asked) and the
// top_logprobs of row i at top_id/top_logprob[i * kSampleMaxTopLogprobs + j].
struct SampledRows {
  std::vector<int32_t> token;
  std::vector<float> logprob;
  std::vector<int32_t> top_id;
  std::vector<float> top_logprob;
};

class Tensor;

// A device's sample_rows kernel: logits [plan.rows.size(), V] float32 on that
// device, the plan already checked. Registered by the backend of the device
// (sampling/row_sampler.h runs the host twin where none is).
using RowSamplerFn = SampledRows (*)(const Tensor& logits, const SampleRowsPlan& plan);
void register_row_sampler(Device d, RowSamplerFn fn);
RowSamplerFn row_sampler(Device d);  // nullptr when none

namespace sample_math {

INGOT_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) that depends only on (seed, step).
INGOT_HD inline double uniform(uint64_t seed, uint64_t step) {
  const uint64_t r = mix64(mix64(seed) ^ mix64(step * 0xd1b54a32d192ed03ULL + 1));
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

// A logit after the row's edit: the float operations of the host sampler.
INGOT_HD inline float apply_edit(float x, const LogitEdit& e, const SampleRow& r) {
  if (e.has_bias) x += e.bias;
  if (e.repeat) x = x > 0 ? x / r.repetition_penalty : x * r.repetition_penalty;
  if (e.count > 0) x -= r.presence_penalty + r.frequency_penalty * static_cast<float>(e.count);
  return x;
}

// Candidates sorted most likely first, prob[i] = exp((logit - max) / T) as
// float and `sum` their double sum: the index top_p / min_p keep and the
// draw `u01` picks (the host sampler's rule).
INGOT_HD inline int pick_sorted(const float* prob, int n, double sum, float top_p, float min_p, double u01) {
  int keep = n;
  if (top_p < 1.0f) {
    double acc = 0;
    for (int i = 0; i < keep; ++i) {
      acc += prob[i] / sum;
      if (acc >= top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (min_p > 0.0f) {
    const float floor = min_p * prob[0];
    int k = 1;
    while (k < keep && prob[k] >= floor) ++k;
    keep = k;
  }
  double total = 0;
  for (int i = 0; i < keep; ++i) total += prob[i];
  const double u = u01 * total;
  double acc = 0;
  for (int i = 0; i < keep; ++i) {
    acc += prob[i];
    if (u < acc) return i;
  }
  return keep - 1;
}

// A candidate's weight before normalisation.
INGOT_HD inline float weight(float x, float mx, float inv_t) { return expf((x - mx) * inv_t); }

// Double sum of the weights of x[lo, hi), in id order: one chunk of an
// unfiltered draw.
INGOT_HD inline double chunk_sum(const float* x, int64_t lo, int64_t hi, float mx, float inv_t) {
  double s = 0;
  for (int64_t j = lo; j < hi; ++j) s += weight(x[j], mx, inv_t);
  return s;
}

INGOT_HD inline int64_t chunk_len(int64_t v) { return (v + kSampleChunks - 1) / kSampleChunks; }

// An unfiltered draw over all v ids in id order, given each chunk's sum
// (parts[c] = chunk_sum of ids [c * chunk_len, (c + 1) * chunk_len)).
INGOT_HD inline int32_t draw_chunked(const float* x, int64_t v, float mx, float inv_t, const double* parts,
                                     double u01) {
  const int64_t len = chunk_len(v);
  double total = 0;
  for (int c = 0; c < kSampleChunks; ++c) total += parts[c];
  const double u = u01 * total;
  double acc = 0;
  for (int c = 0; c < kSampleChunks; ++c) {
    const int64_t lo = c * len, hi = lo + len < v ? lo + len : v;
    if (lo >= hi) break;
    if (u < acc + parts[c]) {
      double in = acc;
      for (int64_t j = lo; j < hi; ++j) {
        in += weight(x[j], mx, inv_t);
        if (u < in) return static_cast<int32_t>(j);
      }
      return static_cast<int32_t>(hi - 1);
    }
    acc += parts[c];
  }
  return static_cast<int32_t>(v - 1);
}

// Top-k candidates are ranked by (value desc, id asc); after (pv, pid) in that
// order comes (v, id) when this holds.
INGOT_HD inline bool ranks_after(float v, int32_t id, float pv, int32_t pid) {
  return v < pv || (v == pv && id > pid);
}

}  // namespace sample_math
}  // namespace ingot
