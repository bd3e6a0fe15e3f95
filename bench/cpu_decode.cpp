// The CPU's ceilings for decode and prefill: this machine's memory-read
// bandwidth (the decode roofline: bandwidth / bytes read per token) and the
// dense-linear GEMM rate at a Llama-3.2-1B layer's shapes. A model's own
// prefill and decode rates come from `ingot bench model` (the engine path
// `ingot serve` runs), measured in the same session.
//
//   cpu_decode [--threads 1,2] [--bw-gib 1] [--weights-gb G]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "runtime/runtime.h"
#include "tensor/half.h"
#include "util/error.h"

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

// Fills bf16 values uniform in [-scale, scale) from a per-chunk xorshift stream.
void fill_random_bf16(uint16_t* dst, int64_t n, uint64_t seed, float scale) {
  cpu::pool().parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(b) * 0xBF58476D1CE4E5B9ull + 1;
    for (int64_t i = b; i < e; ++i) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      float u = static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
      dst[i] = f32_to_bf16((2.0f * u - 1.0f) * scale);
    }
  });
}

// Read bandwidth: a vectorised sum over `bytes`, split across the pool; best of 3.
double read_bandwidth(size_t bytes) {
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> buf(static_cast<size_t>(n));
  cpu::pool().parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i & 7);
  });
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const int chunks = 16 * cpu::num_threads();  // claimed dynamically, as the linear kernel does
    std::vector<float> part(static_cast<size_t>(chunks));
    auto t0 = Clock::now();
    cpu::pool().run(chunks, [&](int64_t c) {
      int64_t b = n / chunks * c, e = c == chunks - 1 ? n : n / chunks * (c + 1);
      part[static_cast<size_t>(c)] = cpu::sum(buf.data() + b, e - b);
    });
    double dt = seconds_since(t0);
    for (float p : part) sink = sink + p;
    best = std::max(best, static_cast<double>(bytes) / dt);
  }
  return best;
}

// GEMM rate of the dense linear kernel on one prefill-shaped product, by wall
// time and by this process's CPU time (the latter is robust to a loaded machine).
void gemm_rate(int64_t n, int64_t k, int64_t m, DType wdt) {
  std::vector<float> x(static_cast<size_t>(n * k), 0.01f), y(static_cast<size_t>(n * m));
  std::vector<uint16_t> w16(static_cast<size_t>(m * k));
  std::vector<float> w32;
  fill_random_bf16(w16.data(), m * k, 7, 0.02f);
  if (wdt == DType::F32) {
    w32.resize(w16.size());
    for (size_t i = 0; i < w16.size(); ++i) w32[i] = bf16_to_f32(w16[i]);
  }
  const void* w = wdt == DType::F32 ? static_cast<const void*>(w32.data()) : w16.data();
  cpu::linear_dense(x.data(), n, k, w, wdt, k, m, y.data());
  const int reps = n >= 64 ? 3 : 20;
  std::clock_t c0 = std::clock();
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) cpu::linear_dense(x.data(), n, k, w, wdt, k, m, y.data());
  double wall = seconds_since(t0), cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  double flop = 2.0 * static_cast<double>(n * k * m) * reps;
  const double wbytes = static_cast<double>(m * k) * static_cast<double>(dtype_size(wdt)) * reps;
  std::printf("gemm %s n=%ld k=%ld m=%ld, %d thread(s): %.1f GFLOP/s wall, %.1f GFLOP/s per CPU-second, "
              "weights read at %.1f GB/s wall\n",
              dtype_name(wdt), static_cast<long>(n), static_cast<long>(k), static_cast<long>(m),
              cpu::num_threads(), flop / wall / 1e9, flop / cpu / 1e9, wbytes / wall / 1e9);}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2};
  double bw_gib = 1.0, weights_gb = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads")
      threads = parse_list(argv[i + 1]);
    else if (a == "--bw-gib")
      bw_gib = std::atof(argv[i + 1]);
    else if (a == "--weights-gb")
      weights_gb = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    runtime::init_backends();
    std::printf("isa: %s\n", cpu::isa_name(cpu::active_isa()));
    for (int t : threads) {
      cpu::set_num_threads(t);
      const double bw = read_bandwidth(static_cast<size_t>(bw_gib * (1ull << 30)));
      std::printf("read bandwidth, %d thread(s): %.1f GB/s", t, bw / 1e9);
      if (weights_gb > 0) std::printf(" -> decode roofline %.2f tok/s for %.3f GB per token", bw / 1e9 / weights_gb, weights_gb);
      std::printf("\n");
      for (int64_t n : {1, 64, 512}) gemm_rate(n, 2048, 2048, DType::BF16);
      gemm_rate(1, 2048, 128256, DType::BF16);  // the tied lm_head: 525 MB streamed from memory
      gemm_rate(64, 2048, 2048, DType::F32);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_decode: %s\n", e.what());
    return 1;
  }
}
