// Prefill / decode speed of a random-weight Llama-shaped bf16 (or, with
// --quant q4_0, Q4_0) model on the GPU, plus the device copy bandwidth the
// decode roofline needs.
//   gpu_decode [--shape 135m|1b|8b] [--pp 512] [--tg 128] [--reps 3] [--depth N] [--kv KIND] [--quant q4_0]
//              [--batch N]
// --batch N > 1 decodes N sequences together instead (batch_decode.h); the
// default, 1, prints the batch-1 figures below.
// --kv picks the KV store (contiguous by default; paged, paged-direct, kv8 and
// kv4 run the plain decode only: graph replay needs the contiguous store).
// Prints pp/tg tok/s (median of reps after one warm-up, timed around
// cudaStreamSynchronize) and the roofline: copy bandwidth / bytes per token.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/runtime.h"
#include "batch_decode.h"
#include "bench_util.h"
#include "gpu_fill.h"
#include "models/model.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "stepgraph/greedy_step.h"
#include "util/error.h"

using namespace ingot;
using bench::median;
using bench::now_s;
using bench::random_tokens;

namespace {

std::string g_kv = "contiguous";  // --kv
bool g_q4_0 = false;              // --quant q4_0: every matrix (embedding included) Q4_0

struct Shape3 {
  int64_t hidden, layers, heads, kv_heads, head_dim, inter, vocab;
  bool tied;
};

Shape3 shape_for(const std::string& name) {
  if (name == "135m") return {576, 30, 9, 3, 64, 1536, 49152, true};  // SmolLM2-135M
  if (name == "1b") return {2048, 16, 32, 8, 64, 8192, 128256, true};
  if (name == "8b") return {4096, 32, 32, 8, 128, 14336, 128256, false};
  fail(ErrorKind::InvalidArgument, "--shape must be 135m, 1b or 8b, got ", name);
}

std::string config_json(const Shape3& s) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                R"({"model_type":"llama","architectures":["LlamaForCausalLM"],"vocab_size":%lld,)"
                R"("hidden_size":%lld,"intermediate_size":%lld,"num_hidden_layers":%lld,)"
                R"("num_attention_heads":%lld,"num_key_value_heads":%lld,"head_dim":%lld,)"
                R"("max_position_embeddings":131072,"rms_norm_eps":1e-5,"tie_word_embeddings":%s,)"
                R"("rope_theta":500000.0,"rope_scaling":{"rope_type":"llama3","factor":32.0,)"
                R"("low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192},)"
                R"("torch_dtype":"bfloat16"})",
                (long long)s.vocab, (long long)s.hidden, (long long)s.inter, (long long)s.layers,
                (long long)s.heads, (long long)s.kv_heads, (long long)s.head_dim, s.tied ? "true" : "false");
  return buf;
}

// Parameters generated on the device: matrices uniform bf16, norms ones.
class RandomSource final : public WeightSource {
 public:
  explicit RandomSource(const Shape3& s) : s_(s) {}
  bool has(const std::string& name) const override { return name != "lm_head.weight" || !s_.tied; }
  Weight matrix(const std::string& name) const override {
    auto [rows, cols] = dims(name);
    Weight w;
    if (g_q4_0) {
      w.data = Tensor::empty({rows, cols}, DType::Q4_0, Device::CUDA);
      // d * (q - 8) spans about the bf16 weights' [-0.03, 0.03].
      if (!fill_random_q4_0(w.data.raw(), rows * cols / 32, ++seed_, 0.03f / 8, cuda::stream()))
        fail(ErrorKind::Internal, "fill kernel failed");
      bytes_ += w.nbytes();
      return w;
    }
    w.data = Tensor::empty({rows, cols}, DType::BF16, Device::CUDA);
    // Small weights keep the random activations finite through every layer.
    if (!fill_random_bf16(w.data.raw(), rows * cols, ++seed_, 0.03f, cuda::stream()))
      fail(ErrorKind::Internal, "fill kernel failed");
    bytes_ += w.nbytes();
    return w;
  }
  Tensor vector(const std::string& name) const override {
    std::vector<float> ones(static_cast<size_t>(s_.hidden), 1.0f);
    return Tensor::from_f32(ones, {s_.hidden}).to(Device::CUDA);
  }
  Tensor raw(const std::string& name) const override { fail(ErrorKind::Unsupported, "raw ", name); }
  size_t total_bytes() const override { return bytes_; }

 private:
  std::pair<int64_t, int64_t> dims(const std::string& n) const {
    const int64_t q = s_.heads * s_.head_dim, kv = s_.kv_heads * s_.head_dim;
    auto ends = [&](const char* suf) { return n.ends_with(suf); };
    if (ends("embed_tokens.weight") || ends("lm_head.weight")) return {s_.vocab, s_.hidden};
    if (ends("q_proj.weight")) return {q, s_.hidden};
    if (ends("k_proj.weight") || ends("v_proj.weight")) return {kv, s_.hidden};
    if (ends("o_proj.weight")) return {s_.hidden, q};
    if (ends("gate_proj.weight") || ends("up_proj.weight")) return {s_.inter, s_.hidden};
    if (ends("down_proj.weight")) return {s_.hidden, s_.inter};
    fail(ErrorKind::InvalidArgument, "unknown parameter ", n);
  }
  Shape3 s_;
  mutable uint64_t seed_ = 1234;
  mutable size_t bytes_ = 0;
};

// Device-to-device copy of a 1 GiB buffer; bytes read + written per second.
double copy_bandwidth() {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  CUDA_OK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<double> rates;
  for (int r = 0; r < 6; ++r) {
    CUDA_OK(cudaEventRecord(e0, cuda::stream()));
    for (int i = 0; i < 5; ++i) CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, cuda::stream()));
    CUDA_OK(cudaEventRecord(e1, cuda::stream()));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) rates.push_back(5.0 * 2.0 * double(bytes) / (ms * 1e-3));
  }
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  return median(rates);
}

// One prefill of `pp` tokens into a fresh cache; seconds.
double run_prefill(Model& m, int64_t pp) {
  auto cache = new_cache(m, CacheOptions{g_kv, {}});
  BatchInput in;
  in.add(cache.get(), random_tokens(pp, m.vocab_size(), 7));
  cuda::synchronize();
  double t0 = now_s();
  Tensor logits = m.forward(in);
  cuda::synchronize();
  return now_s() - t0;
}

// Bandwidth of one linear() at n = 1 over a bf16 (or Q4_0) weight of [m, k]
// (the decode GEMV): weight bytes read per second.
double linear_bandwidth(int64_t m, int64_t k) {
  Weight w;
  w.data = Tensor::empty({m, k}, g_q4_0 ? DType::Q4_0 : DType::BF16, Device::CUDA);
  const bool ok = g_q4_0 ? fill_random_q4_0(w.data.raw(), m * k / 32, 99, 0.03f / 8, cuda::stream())
                         : fill_random_bf16(w.data.raw(), m * k, 99, 0.03f, cuda::stream());
  if (!ok) fail(ErrorKind::Internal, "fill");
  Tensor x = Tensor::from_f32(std::vector<float>(static_cast<size_t>(k), 0.5f), {1, k}).to(Device::CUDA);
  for (int i = 0; i < 3; ++i) ops::linear(x, w);
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  const int reps = 50;
  CUDA_OK(cudaEventRecord(e0, cuda::stream()));
  for (int i = 0; i < reps; ++i) ops::linear(x, w);
  CUDA_OK(cudaEventRecord(e1, cuda::stream()));
  CUDA_OK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  return reps * double(w.nbytes()) / (ms * 1e-3);
}

// Greedy decode of `tg` tokens from an empty context (llama-bench's tg);
// each step's token id comes back to the host like in generation. Seconds.
double run_decode(Model& m, int64_t tg, int64_t depth, double* enqueue_s) {
  auto cache = new_cache(m, CacheOptions{g_kv, {}});
  if (depth > 0) {
    BatchInput in;
    in.add(cache.get(), random_tokens(depth, m.vocab_size(), 9));
    m.forward(in);
  }
  cuda::synchronize();
  int32_t tok = 1;
  double t0 = now_s();
  for (int64_t i = 0; i < tg; ++i) {
    BatchInput in;
    in.add(cache.get(), std::span(&tok, 1));
    double te = now_s();
    Tensor logits = m.forward(in);
    *enqueue_s += now_s() - te;  // host time to queue the step's work
    Tensor id = ops::argmax(logits).to(Device::CPU);
    tok = id.data<int32_t>()[0];
  }
  cuda::synchronize();
  return now_s() - t0;
}

// The same greedy decode replayed from a captured graph (GreedyStepGraph):
// the first step captures, the host only launches and reads each token id.
double run_decode_graph(Model& m, int64_t tg, int64_t depth, double* enqueue_s, bool read_once) {
  auto cache = new_cache(m, CacheOptions{g_kv, {}});
  if (depth > 0) {
    BatchInput in;
    in.add(cache.get(), random_tokens(depth, m.vocab_size(), 9));
    m.forward(in);
  }
  auto g = GreedyStepGraph::create(m, {cache.get()}, depth + tg + 2);
  if (!g) fail(ErrorKind::Unsupported, "no step graph for this model/backend");
  g->step({1});  // captures (once per batch size per process), then replays
  cuda::synchronize();
  double t0 = now_s();
  if (read_once) {
    g->next_n(tg);  // no wait between tokens; the ids come back at the end
  } else {
    for (int64_t i = 0; i < tg; ++i) {
      double te = now_s();
      g->next();
      *enqueue_s += now_s() - te;  // includes the wait for the token id
    }
  }
  cuda::synchronize();
  return now_s() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape = "1b";
  int64_t pp = 512, tg = 128, reps = 3, depth = 0, batch = 1;
  // Positions the random model accepts (its max_position_embeddings).
  constexpr int64_t kMaxTokens = 131072;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) fail(ErrorKind::InvalidArgument, a, " needs a value");
        return argv[++i];
      };
      if (a == "--shape") shape = next();
      else if (a == "--pp") pp = bench::parse_count(a, next(), 1, kMaxTokens);
      else if (a == "--tg") tg = bench::parse_count(a, next(), 1, kMaxTokens);
      else if (a == "--reps") reps = bench::parse_count(a, next(), 1, 1000);
      else if (a == "--depth") depth = bench::parse_count(a, next(), 0, kMaxTokens);
      else if (a == "--batch") batch = bench::parse_count(a, next(), 1, bench::kMaxBatch);
      else if (a == "--kv") g_kv = next();
      else if (a == "--quant") {
        if (next() != "q4_0") fail(ErrorKind::InvalidArgument, "--quant takes q4_0");
        g_q4_0 = true;
      } else {
        std::fprintf(stderr,
                     "usage: gpu_decode [--shape 135m|1b|8b] [--pp N] [--tg N] [--reps N] [--depth N] [--kv KIND] "
                     "[--quant q4_0] [--batch N]\n");
        return 2;
      }
    }
    // Batched sequences decode after their prompt: --depth tokens, else --pp.
    const int64_t context = batch > 1 && depth == 0 ? pp : depth;
    if (context + tg + 2 > kMaxTokens)
      fail(ErrorKind::InvalidArgument, "context ", context, " + --tg ", tg, " passes the model's ", kMaxTokens,
           " positions");
    runtime::init_backends();
    if (!cuda::available()) fail(ErrorKind::Unsupported, "no CUDA device");
    const Shape3 s = shape_for(shape);
    ModelConfig cfg = parse_model_config(config_json(s));
    RandomSource src(s);
    LoadOptions opt;
    opt.device = Device::CUDA;
    opt.dtype = DType::BF16;
    double tl = now_s();
    auto model = build_model(cfg, src, opt);
    cuda::synchronize();
    const double wbytes = static_cast<double>(model->weight_bytes());
    std::printf("shape %s: %.2f GB of %s weights, built in %.1f s\n", shape.c_str(), wbytes / 1e9,
                g_q4_0 ? "q4_0" : "bf16", now_s() - tl);

    const double bw = copy_bandwidth();
    // Decode reads every weight once per token (tied embeddings: the table once, as the lm head).
    std::printf("device copy bandwidth (read+write): %.0f GB/s -> decode roofline %.0f tok/s\n", bw / 1e9,
                bw / wbytes);

    if (batch > 1) {
      bench::BatchDecodeArgs ba;
      ba.batch = batch;
      ba.context = context;
      ba.tg = tg;
      ba.reps = reps;
      ba.kv = g_kv;
      ba.copy_bandwidth = bw;
      bench::run_batch_decode(*model, ba);
      std::printf("device memory peak %.2f GB\n", cuda::memory_stats().peak_bytes / 1e9);
      return 0;
    }
    run_prefill(*model, pp);  // warm-up (cuBLAS heuristics, allocator)
    std::vector<double> tp, td;
    for (int64_t r = 0; r < reps; ++r) tp.push_back(run_prefill(*model, pp));
    double pps = median(tp);
    std::printf("pp%lld: %.1f tok/s (median %.2f ms)\n", (long long)pp, pp / pps, pps * 1e3);

    double enq = 0;
    run_decode(*model, std::min<int64_t>(tg, 16), depth, &enq);  // warm-up
    enq = 0;
    for (int64_t r = 0; r < reps; ++r) td.push_back(run_decode(*model, tg, depth, &enq));
    double tgs = median(td);
    std::printf("tg%lld (depth %lld): %.1f tok/s (median %.3f ms/token, %.0f%% of roofline; "
                "host enqueue %.3f ms/token)\n",
                (long long)tg, (long long)depth, tg / tgs, tgs / tg * 1e3, 100.0 * (tg / tgs) / (bw / wbytes),
                enq / double(reps * tg) * 1e3);
    std::printf("kv store: %s\n", g_kv.c_str());
    if (g_kv == "contiguous") {
      // Graph replay: first a warm-up (capture included), then the timed runs.
      double genq = 0;
      std::vector<double> tgr;
      run_decode_graph(*model, std::min<int64_t>(tg, 16), depth, &genq, false);
      genq = 0;
      for (int64_t r = 0; r < reps; ++r) tgr.push_back(run_decode_graph(*model, tg, depth, &genq, false));
      double tgg = median(tgr);
      std::printf("tg%lld (depth %lld) graph replay: %.1f tok/s (median %.3f ms/token, %.0f%% of roofline; "
                  "host per token incl. id readback %.3f ms; capture step not timed)\n",
                  (long long)tg, (long long)depth, tg / tgg, tgg / tg * 1e3, 100.0 * (tg / tgg) / (bw / wbytes),
                  genq / double(reps * tg) * 1e3);
      std::vector<double> tgo;
      for (int64_t r = 0; r < reps; ++r) tgo.push_back(run_decode_graph(*model, tg, depth, &genq, true));
      const double tgs_once = median(tgo);
      std::printf("tg%lld (depth %lld) graph replay, ids read once: %.1f tok/s (median %.3f ms/token, %.0f%% of roofline)\n",
                  (long long)tg, (long long)depth, tg / tgs_once, tgs_once / tg * 1e3,
                  100.0 * (tg / tgs_once) / (bw / wbytes));
    }
    for (auto [m, k] : {std::pair<int64_t, int64_t>{s.kv_heads * s.head_dim, s.hidden}, {s.inter, s.hidden},
                        {s.hidden, s.inter}, {s.vocab, s.hidden}})
      std::printf("linear n=1 [%lld x %lld] %s: %.0f GB/s of weights\n", (long long)m, (long long)k,
                  g_q4_0 ? "q4_0" : "bf16",
                  linear_bandwidth(m, k) / 1e9);
    auto ms = cuda::memory_stats();
    std::printf("device memory peak %.2f GB\n", ms.peak_bytes / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
