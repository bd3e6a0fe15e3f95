#include "loadgen/plan.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::loadgen {

namespace {

// splitmix64: decorrelates the seeds of neighbouring (stream, index) pairs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void append_random(std::vector<int32_t>& out, int64_t n, const TokenRange& r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(r.lo, r.hi - 1);
  for (int64_t i = 0; i < n; ++i) out.push_back(pick(rng));
}

bool parse_int(std::string_view s, int64_t& v) {
  s = trim(s);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

TokenRange parse_token_range(std::string_view s) {
  size_t colon = s.find(':');
  int64_t lo = 0, hi = 0;
  if (colon == std::string_view::npos || !parse_int(s.substr(0, colon), lo) || !parse_int(s.substr(colon + 1), hi) ||
      lo < 0 || hi <= lo || hi > std::numeric_limits<int32_t>::max())
    fail(ErrorKind::InvalidArgument, "--vocab-range must be LO:HI with 0 <= LO < HI, got '", s, "'");
  return {static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
}

std::vector<std::vector<int32_t>> make_prompts(const PromptSpec& spec, int64_t n, uint64_t seed, uint64_t stream) {
  if (spec.input_len < 0 || spec.prefix_len < 0 || spec.input_len + spec.prefix_len < 1)
    fail(ErrorKind::InvalidArgument, "a prompt needs at least one token (input length + prefix length >= 1)");
  if (spec.range.lo < 0 || spec.range.hi <= spec.range.lo) fail(ErrorKind::InvalidArgument, "empty token range");
  std::vector<int32_t> prefix;
  append_random(prefix, spec.prefix_len, spec.range, mix(seed ^ 0x5eedULL));
  std::vector<std::vector<int32_t>> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> p = prefix;
    p.reserve(static_cast<size_t>(spec.prefix_len + spec.input_len));
    append_random(p, spec.input_len, spec.range, mix(mix(seed) ^ mix(stream + 1) ^ static_cast<uint64_t>(i)));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<double> poisson_arrivals(int64_t n, double rate, uint64_t seed) {
  if (!(rate > 0)) fail(ErrorKind::InvalidArgument, "request rate must be > 0");
  std::vector<double> t(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate)) return t;
  std::mt19937_64 rng(mix(seed ^ 0xa221ULL));
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  // The first request starts at once; the gaps between arrivals are exponential.
  for (size_t i = 1; i < t.size(); ++i) t[i] = now += gap(rng);
  return t;
}

std::vector<int64_t> parse_positive_ints(std::string_view s, std::string_view what) {
  std::vector<int64_t> out;
  for (const std::string& part : split(s, ',')) {
    int64_t v = 0;
    if (!parse_int(part, v) || v <= 0)
      fail(ErrorKind::InvalidArgument, what, ": not a positive integer: '", trim(part), "'");
    out.push_back(v);
  }
  return out;
}

std::vector<double> parse_rates(std::string_view s, std::string_view what) {
  std::vector<double> out;
  for (const std::string& part : split(s, ',')) {
    std::string p(trim(part));
    if (p == "inf") {
      out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    double v = 0;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || !(v > 0) || std::isinf(v))
      fail(ErrorKind::InvalidArgument, what, ": not a positive number or 'inf': '", p, "'");
    out.push_back(v);
  }
  return out;
}

}  // namespace ingot::loadgen
