// What a benchmark run sends: prompts of exact token lengths (random ids,
// optionally behind one shared prefix), their arrival times, and the levels
// (concurrencies or request rates) it steps through.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace ingot::loadgen {

// Token ids prompts are drawn from: [lo, hi). A range inside every common
// vocabulary that holds no special tokens keeps random prompts plain text.
struct TokenRange {
  int32_t lo = 1000;
  int32_t hi = 30000;
};

// "LO:HI" -> {LO, HI}; throws InvalidArgument unless 0 <= LO < HI.
TokenRange parse_token_range(std::string_view s);

struct PromptSpec {
  int64_t input_len = 128;  // random tokens of each prompt (after the prefix)
  int64_t prefix_len = 0;   // tokens every prompt starts with
  TokenRange range;
};

// `n` prompts of prefix_len + input_len ids each. The shared prefix depends
// on `seed` only; each prompt's own part on (seed, stream, index), so levels
// that pass different `stream`s never repeat a prompt (no prefix-cache hits
// beyond the shared prefix).
std::vector<std::vector<int32_t>> make_prompts(const PromptSpec& spec, int64_t n, uint64_t seed, uint64_t stream);

// Start times (seconds from the level's start) of `n` requests arriving as a
// Poisson process of `rate` requests/s; all 0 when rate is infinite.
std::vector<double> poisson_arrivals(int64_t n, double rate, uint64_t seed);

// "1,8,64" -> {1, 8, 64}; every value must be > 0.
std::vector<int64_t> parse_positive_ints(std::string_view s, std::string_view what);
// "0.5,2,inf" -> {0.5, 2, inf}; every value must be > 0 ("inf": all at once).
std::vector<double> parse_rates(std::string_view s, std::string_view what);

}  // namespace ingot::loadgen
