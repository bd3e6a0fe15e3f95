// Small helpers shared by the GPU benchmark programs: wall time, medians,
// random prompts, and whole-number flags that refuse garbage.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "util/error.h"

namespace ingot::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(g);
  return t;
}

// The value of `flag` as an integer in [lo, hi]; anything else is a clear error.
inline int64_t parse_count(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    fail(ErrorKind::InvalidArgument, flag, " needs a whole number, got '", text, "'");
  if (v < lo || v > hi) fail(ErrorKind::InvalidArgument, flag, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

}  // namespace ingot::bench
