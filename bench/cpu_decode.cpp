// CPU prefill / decode throughput of a Llama-3.2-1B-shaped model with random
// bf16 weights generated here (nothing is read from disk), next to this
// machine's memory-read roofline measured in the same run.
//
//   cpu_decode [--threads 1,2] [--prompts 64,512] [--decode 32] [--layers 16] [--bw-gib 1]
//   cpu_decode --gemm 1 [--threads 1,2]     (only the dense-linear GEMM rate)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "models/model.h"
#include "ops/ops.h"
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

class RandomSource final : public WeightSource {
 public:
  explicit RandomSource(const ModelConfig& c) : c_(c) {}
  bool has(const std::string& name) const override { return name != "lm_head.weight"; }
  Weight matrix(const std::string& name) const override {
    auto [rows, cols] = shape_of(name);
    Weight w;
    w.data = Tensor::empty({rows, cols}, DType::BF16);
    fill_random_bf16(w.data.data<uint16_t>(), rows * cols, ++seed_,
                     0.5f / std::sqrt(static_cast<float>(cols)));
    bytes_ += w.nbytes();
    return w;
  }
  Tensor vector(const std::string& name) const override {
    return Tensor::from_f32(std::vector<float>(static_cast<size_t>(c_.hidden_size), 1.0f), {c_.hidden_size});
  }
  Tensor raw(const std::string& name) const override { fail(ErrorKind::NotFound, "no raw tensor ", name); }
  size_t total_bytes() const override { return bytes_; }

 private:
  std::pair<int64_t, int64_t> shape_of(const std::string& name) const {
    const int64_t hid = c_.hidden_size, hd = c_.head_dim;
    auto ends = [&](const char* s) {
      return name.size() >= std::strlen(s) && name.rfind(s) == name.size() - std::strlen(s);
    };
    if (ends("embed_tokens.weight")) return {c_.vocab_size, hid};
    if (ends("q_proj.weight")) return {c_.num_attention_heads * hd, hid};
    if (ends("k_proj.weight") || ends("v_proj.weight")) return {c_.num_key_value_heads * hd, hid};
    if (ends("o_proj.weight")) return {hid, c_.num_attention_heads * hd};
    if (ends("gate_proj.weight") || ends("up_proj.weight")) return {c_.intermediate_size, hid};
    if (ends("down_proj.weight")) return {hid, c_.intermediate_size};
    fail(ErrorKind::NotFound, "unexpected weight ", name);
  }
  const ModelConfig& c_;
  mutable uint64_t seed_ = 0;
  mutable size_t bytes_ = 0;
};

ModelConfig llama_1b_config(int layers) {
  ModelConfig c;
  c.model_type = "llama";
  c.vocab_size = 128256;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.dtype = DType::BF16;
  RopeParams r;
  r.type = "llama3";
  r.theta = 500000.0;
  r.factor = 32.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position = 8192;
  c.rope["default"] = r;
  return c;
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

std::vector<int32_t> random_ids(int n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) {
    seed = seed * 1664525u + 1013904223u;
    id = static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2}, prompts{64, 512};
  int decode = 32, layers = 16;
  double bw_gib = 1.0;
  bool gemm_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads")
      threads = parse_list(argv[i + 1]);
    else if (a == "--prompts")
      prompts = parse_list(argv[i + 1]);
    else if (a == "--decode")
      decode = std::atoi(argv[i + 1]);
    else if (a == "--layers")
      layers = std::atoi(argv[i + 1]);
    else if (a == "--bw-gib")
      bw_gib = std::atof(argv[i + 1]);
    else if (a == "--gemm")
      gemm_only = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    runtime::init_backends();
    std::printf("isa: %s\n", cpu::isa_name(cpu::active_isa()));
    if (gemm_only) {
      for (int t : threads) {
        cpu::set_num_threads(t);
        for (int64_t n : {1, 64, 512}) gemm_rate(n, 2048, 2048, DType::BF16);
        gemm_rate(1, 2048, 128256, DType::BF16);  // the tied lm_head: 525 MB streamed from memory
        gemm_rate(64, 2048, 2048, DType::F32);
      }
      return 0;
    }
    ModelConfig cfg = llama_1b_config(layers);
    RandomSource src(cfg);
    auto t0 = Clock::now();
    auto model = build_model(cfg, src, LoadOptions{});
    std::printf("model: Llama-3.2-1B shape, %d layers, bf16 random, %.3f GB weights (built in %.1f s)\n",
                layers, static_cast<double>(model->weight_bytes()) / 1e9, seconds_since(t0));

    std::map<int, double> bandwidth;
    for (int t : threads) {
      cpu::set_num_threads(t);
      bandwidth[t] = read_bandwidth(static_cast<size_t>(bw_gib * (1ull << 30)));
      std::printf("read bandwidth, %d thread(s): %.1f GB/s\n", t, bandwidth[t] / 1e9);
    }

    const auto& layout = model->cache_layout();
    for (int t : threads) {
      cpu::set_num_threads(t);
      for (int p : prompts) {
        auto cache = new_cache(*model);
        BatchInput in;
        in.tokens = random_ids(p, cfg.vocab_size, static_cast<uint32_t>(p));
        in.seqs.push_back({cache.get(), p, false});
        auto tp = Clock::now();
        Tensor logits = model->forward(in);
        double pre = seconds_since(tp);
        int32_t tok = ops::argmax(logits).to_i32_vector()[0];
        std::printf("threads %d  prefill %4d tokens: %8.1f tok/s (%.2f s)\n", t, p, p / pre, pre);
        if (p != prompts.front()) continue;
        // Decode after the first (shortest) prompt: per-step times, median.
        std::vector<double> steps;
        for (int s = 0; s < decode; ++s) {
          BatchInput d;
          d.tokens = {tok};
          d.seqs.push_back({cache.get(), 1, false});
          auto ts = Clock::now();
          tok = ops::argmax(model->forward(d)).to_i32_vector()[0];
          steps.push_back(seconds_since(ts));
        }
        double step = median(steps);
        // Bytes one step reads: every weight once plus the K/V of the context (bf16).
        double ctx = p + decode / 2.0;
        double kv = 0;
        for (const auto& l : layout) kv += 2.0 * ctx * static_cast<double>(l.kv_heads * l.head_dim) * 2.0;
        double bytes = static_cast<double>(model->weight_bytes()) + kv;
        double roof = bandwidth[t] / bytes;
        std::printf(
            "threads %d  decode (ctx %d, %d steps): %6.2f tok/s median, roofline %.2f tok/s "
            "(%.2f GB/token) -> %.0f%% of roofline\n",
            t, p, decode, 1.0 / step, roof, bytes / 1e9, 100.0 / step / roof);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
