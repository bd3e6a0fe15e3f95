// The bf16 decode products of one step of a Llama-shaped model, timed alone
// for each activation row count and each kernel the backend can pick:
//   decode_products [--shape 1b|8b] [--rows 1,2,4,8,16,32,64] [--reps 200]
// Per row count it prints the time of one layer's four launches (q/k/v in one,
// o with its residual, gate/up with SwiGLU, down with its residual) and of the
// vocabulary projection, with "cores" = the CUDA-core GEMV (up to 8 rows) or
// cuBLAS (more) and "mma" = the tensor-core kernel (gemv_mma.cu), and the
// weight bytes per second each reaches. Random weights; the times are medians
// over reps after a warm-up, synchronised per rep.
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/tuning.h"
#include "bench_util.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "util/error.h"

using namespace ingot;
using bench::median;
using bench::now_s;

namespace {

struct Dims {
  int64_t hidden, q, kv, inter, vocab;
};

Weight random_bf16(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> v(static_cast<size_t>(m * k));
  for (float& x : v) x = nd(g);
  Weight w;
  w.data = Tensor::from_f32(v, Shape({m, k})).to(DType::BF16).to(Device::CUDA);
  return w;
}

Tensor random_rows(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * k));
  for (float& x : v) x = nd(g);
  return Tensor::from_f32(v, Shape({n, k})).to(Device::CUDA);
}

// Median seconds of f over reps, after 5 warm-up calls.
template <class F>
double time_of(F&& f, int reps) {
  for (int i = 0; i < 5; ++i) f();
  cuda::synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    f();
    cuda::synchronize();
    t.push_back(now_s() - t0);
  }
  return median(t);
}

std::vector<int64_t> parse_rows(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    out.push_back(bench::parse_count("--rows", item, 1, cuda::kGemvMmaMaxRows));
  if (out.empty()) fail(ErrorKind::InvalidArgument, "--rows needs at least one count");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string shape = "1b", rows_arg = "1,2,4,8,16,32,64";
    int reps = 200;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) fail(ErrorKind::InvalidArgument, a, " needs a value");
        return argv[++i];
      };
      if (a == "--shape") shape = next();
      else if (a == "--rows") rows_arg = next();
      else if (a == "--reps") reps = static_cast<int>(bench::parse_count("--reps", next(), 1, 100000));
      else fail(ErrorKind::InvalidArgument, "unknown argument ", a);
    }
    Dims d{};
    if (shape == "1b") d = {2048, 2048, 512, 8192, 128256};
    else if (shape == "8b") d = {4096, 4096, 1024, 14336, 128256};
    else fail(ErrorKind::InvalidArgument, "--shape takes 1b or 8b, got ", shape);
    const std::vector<int64_t> rows = parse_rows(rows_arg);
    runtime::init_backends();
    if (!runtime::cuda_available()) fail(ErrorKind::Unsupported, "no CUDA device");

    const Weight wq = random_bf16(d.q, d.hidden, 1), wk = random_bf16(d.kv, d.hidden, 2),
                 wv = random_bf16(d.kv, d.hidden, 3), wo = random_bf16(d.hidden, d.q, 4),
                 wg = random_bf16(d.inter, d.hidden, 5), wu = random_bf16(d.inter, d.hidden, 6),
                 wd = random_bf16(d.hidden, d.inter, 7), head = random_bf16(d.vocab, d.hidden, 8);
    const double layer_bytes = 2.0 * (d.hidden * (d.q + 2 * d.kv) + d.q * d.hidden + 3 * d.inter * d.hidden);
    const double head_bytes = 2.0 * d.vocab * d.hidden;
    const cuda::Tuning defaults = cuda::tuning();
    std::printf("shape %s, %d reps; tuning %s\n", shape.c_str(), reps, cuda::describe(defaults).c_str());
    std::printf("| rows | kernel | layer us | layer TB/s | head us | head TB/s |\n| ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (int64_t n : rows) {
      const Tensor x = random_rows(n, d.hidden, 10), xi = random_rows(n, d.inter, 11), xq = random_rows(n, d.q, 12);
      const Tensor res = random_rows(n, d.hidden, 13);
      for (bool mma : {false, true}) {
        cuda::Tuning t = defaults;
        t.mma_gemv_min_rows = mma ? 1 : cuda::kGemvMmaMaxRows + 1;
        t.mma_gemv_max_rows = cuda::kGemvMmaMaxRows;
        cuda::ScopedTuning scoped(t);
        const double layer = time_of(
            [&] {
              (void)ops::linear_many(x, {&wq, &wk, &wv});
              (void)ops::linear_residual(xq, wo, nullptr, res);
              (void)ops::glu_linear(GluOp::SwiGlu, x, wg, wu);
              (void)ops::linear_residual(xi, wd, nullptr, res);
            },
            reps);
        const double head_t = time_of([&] { (void)ops::linear(x, head); }, reps);
        std::printf("| %lld | %s | %.1f | %.2f | %.1f | %.2f |\n", static_cast<long long>(n),
                    mma ? "mma" : (n <= cuda::kGemvMaxRows ? "cores" : "cublas"), layer * 1e6,
                    layer_bytes / layer / 1e12, head_t * 1e6, head_bytes / head_t / 1e12);
      }
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "decode_products: %s\n", e.what());
    return 1;
  }
}
