// The statistics a benchmark reports: percentiles, the per-level summary of
// served requests (vllm bench serve's definitions), and the decode window of
// concurrent sequences for `ingot bench model`.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/stream.h"

namespace ingot::loadgen {

// The p-th percentile (0..100) with linear interpolation between the closest
// ranks (numpy's default); 0 for an empty set.
double percentile(std::vector<double> values, double p);
double median(std::vector<double> values);

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  int64_t count = 0;
};
Distribution distribution(const std::vector<double>& values);

struct LevelSummary {
  int64_t requests = 0;
  int64_t completed = 0;
  std::array<int64_t, 5> failures{};  // indexed by Failure; [0] unused
  int64_t errors() const;
  int64_t output_len_mismatch = 0;  // completed requests whose token count differs from the one asked
  int64_t usage_reported = 0;       // completed requests whose count came from `usage`
  int64_t input_tokens = 0;         // sent by completed requests
  int64_t output_tokens = 0;        // received by completed requests
  double duration_s = 0;
  double request_throughput = 0;    // completed / duration
  double output_throughput = 0;     // output tokens / duration
  double total_throughput = 0;      // (input + output tokens) / duration
  Distribution ttft, tpot, itl, e2el;  // seconds
  std::vector<std::string> error_samples;  // the first few distinct messages
};

// TPOT of one request, (latency - TTFT) / (output tokens - 1); < 0 when it
// generated fewer than 2 tokens.
double tpot_of(const RequestResult& r);

LevelSummary summarize(const std::vector<RequestResult>& results, double duration_s, int64_t expected_output_len);

// The decode rate of sequences generating together: each sequence's token
// arrival times (its first token is the one its prefill produced). The
// window opens when the last sequence has its first token; from then on all
// of them decode in the same steps, so each contributes its next `tokens`
// tokens (or as many as it has), and the window closes when the last of
// those arrives. Zero tokens when the window is empty.
struct DecodeWindow {
  double seconds = 0;
  int64_t tokens = 0;
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};
DecodeWindow decode_window(const std::vector<std::vector<double>>& arrivals, int64_t tokens);
// True once every sequence has its first token and `tokens` more after the
// window opened: then the window is as long as asked.
bool decode_window_full(const std::vector<std::vector<double>>& arrivals, int64_t tokens);

}  // namespace ingot::loadgen
