// Prefill and decode speed of one model (a .gguf file or a checkpoint
// directory): `gguf_bench MODEL [prompt_tokens] [gen_tokens] [runs] [threads]`.
// Prints one JSON line with the median tok/s of `runs` runs after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "models/model.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "util/error.h"

using namespace ingot;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_bench MODEL [prompt_tokens] [gen_tokens] [runs] [threads]\n");
    return 2;
  }
  const int pp = argc > 2 ? std::atoi(argv[2]) : 128, tg = argc > 3 ? std::atoi(argv[3]) : 64;
  const int runs = argc > 4 ? std::atoi(argv[4]) : 3;
  try {
    runtime::init_backends();
    if (argc > 5) cpu::set_num_threads(std::atoi(argv[5]));
    auto model = load_model(argv[1]);
    std::vector<int32_t> prompt(static_cast<size_t>(pp));
    for (int i = 0; i < pp; ++i) prompt[static_cast<size_t>(i)] = 100 + (i * 37) % 5000;
    std::vector<double> pps, tgs;
    for (int r = 0; r <= runs; ++r) {
      auto cache = new_cache(*model);
      BatchInput in;
      in.tokens = prompt;
      in.seqs.push_back({cache.get(), pp, false});
      auto t0 = std::chrono::steady_clock::now();
      Tensor last = model->forward(in);
      auto t1 = std::chrono::steady_clock::now();
      for (int i = 0; i < tg; ++i) {
        BatchInput s;
        s.tokens = {ops::argmax(last).to_i32_vector()[0]};
        s.seqs.push_back({cache.get(), 1, false});
        last = model->forward(s);
      }
      auto t2 = std::chrono::steady_clock::now();
      if (r == 0) continue;  // warm-up
      pps.push_back(pp / std::chrono::duration<double>(t1 - t0).count());
      tgs.push_back(tg / std::chrono::duration<double>(t2 - t1).count());
    }
    std::sort(pps.begin(), pps.end());
    std::sort(tgs.begin(), tgs.end());
    std::printf("{\"prefill_tok_s\": %.2f, \"decode_tok_s\": %.2f, \"threads\": %d}\n", pps[pps.size() / 2],
                tgs[tgs.size() / 2], cpu::num_threads());
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
