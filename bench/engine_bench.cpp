// engine_bench: offline serving throughput through the engine at fixed
// concurrency (TTFT / TPOT as in BENCH.md), and a shared-prefix workload with
// and without the prefix cache. Usage: engine_bench [MODEL_DIR] (default: a
// random llama written to /tmp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "engine/tests/test_models.h"
#include "ingot/engine.h"
#include "models/model.h"
#include "runtime/runtime.h"

using namespace ingot;
using namespace ingot::engine;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Run {
  double wall = 0, out_tok_s = 0, ttft_med = 0, tpot_med = 0;
  int64_t out_tokens = 0, hit_tokens = 0;
};

Run serve(Model& m, const EngineOptions& opt, const std::vector<Request>& reqs, int concurrency) {
  auto eng = start_engine(m, opt, nullptr, {});
  Run r;
  std::vector<double> ttft, tpot;
  const auto t0 = Clock::now();
  size_t next = 0;
  struct Live {
    std::shared_ptr<RequestHandle> h;
    Clock::time_point start, first;
    int64_t n = 0;
  };
  std::vector<Live> live;
  while (next < reqs.size() || !live.empty()) {
    while (static_cast<int>(live.size()) < concurrency && next < reqs.size())
      live.push_back({eng->submit(reqs[next++]), Clock::now(), {}, 0});
    for (size_t i = 0; i < live.size();) {
      Chunk c;
      bool done = false;
      if (live[i].h->next(&c, std::chrono::milliseconds(0))) {
        if (live[i].n == 0 && !c.tokens.empty()) live[i].first = Clock::now();
        live[i].n += static_cast<int64_t>(c.tokens.size());
        done = c.finished;
      }
      if (done) {
        const auto end = Clock::now();
        ttft.push_back(secs(live[i].first - live[i].start));
        if (live[i].n > 1) tpot.push_back(secs(end - live[i].first) / static_cast<double>(live[i].n - 1));
        r.out_tokens += live[i].n;
        live.erase(live.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  r.wall = secs(Clock::now() - t0);
  r.out_tok_s = static_cast<double>(r.out_tokens) / r.wall;
  r.ttft_med = median(ttft);
  r.tpot_med = median(tpot);
  r.hit_tokens = eng->stats().prefix_hit_tokens;
  return r;
}

std::vector<int32_t> ids(std::mt19937& g, size_t n, int64_t vocab) {
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(g() % static_cast<uint32_t>(vocab));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::init_backends();
  std::string dir = argc > 1 ? argv[1] : "";
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "ingot_engine_bench_llama").string();
    ingot::testing::LlamaShape s;
    s.vocab = 8192;
    s.hidden = 512;
    s.inter = 1408;
    s.layers = 8;
    s.heads = 8;
    s.kv_heads = 4;
    s.head_dim = 64;
    s.max_pos = 4096;
    ingot::testing::write_random_llama(dir, s);
  }
  auto model = load_model(dir);
  const int64_t V = model->vocab_size();
  std::printf("model: %s (%.1f MB of weights)\n", dir.c_str(), static_cast<double>(model->weight_bytes()) / 1e6);
  std::mt19937 g(1);
  EngineOptions opt;
  opt.kv = "contiguous";
  opt.prefix_cache = false;
  std::printf("\n## offline, 128-token prompts, 32 generated (greedy)\n");
  std::printf("| concurrency | requests | wall s | output tok/s | TTFT median ms | TPOT median ms |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int conc : {1, 8, 64}) {
    std::vector<Request> reqs;
    const int n = std::max(4, conc);  // one wave: TPOT is not mixed with a second wave's prefill
    for (int i = 0; i < n; ++i) {
      Request r;
      r.prompt = ids(g, 128, V);
      r.stop.max_tokens = 32;
      r.stop.ignore_eos = true;
      r.sampling.temperature = 0;
      reqs.push_back(r);
    }
    Run r = serve(*model, opt, reqs, conc);
    std::printf("| %d | %d | %.2f | %.1f | %.1f | %.2f |\n", conc, n, r.wall, r.out_tok_s, r.ttft_med * 1e3,
                r.tpot_med * 1e3);
    std::fflush(stdout);
  }
  std::printf("\n## shared prefix: 8 requests, 512-token common prefix + 32 own tokens, 8 generated, concurrency 4\n");
  std::printf("| prefix cache | wall s | reused prompt tokens | TTFT median ms |\n| --- | ---: | ---: | ---: |\n");
  auto prefix = ids(g, 512, V);
  std::vector<Request> reqs;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = prefix;
    auto own = ids(g, 32, V);
    r.prompt.insert(r.prompt.end(), own.begin(), own.end());
    r.stop.max_tokens = 8;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0;
    reqs.push_back(r);
  }
  for (bool pc : {false, true}) {
    EngineOptions o = opt;
    o.prefix_cache = pc;
    Run r = serve(*model, o, reqs, 4);
    std::printf("| %s | %.2f | %lld | %.1f |\n", pc ? "on" : "off", r.wall, static_cast<long long>(r.hit_tokens),
                r.ttft_med * 1e3);
    std::fflush(stdout);
  }
  return 0;
}
