// KV store decode benchmark: per decode step, every layer appends one token's
// K/V and attends over the whole context (the KV part of a decode step; no
// weights), timed in process CPU time. Also times snapshot write and restore
// of a long prefix (wall time: they wait on the disk).
//   kv_bench [--layers 4] [--contexts 512,4096,16384] [--steps 8] [--dir /tmp] [--threads N]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "kv/contiguous.h"
#include "kv/kinds.h"
#include "kv/snapshot.h"
#include "runtime/runtime.h"

using namespace ingot;
using namespace ingot::kv;
using Clock = std::chrono::steady_clock;

namespace {

Tensor rnd(std::mt19937& rng, const Shape& s) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = nd(rng);
  return Tensor::from_f32(v, s);
}

// Process CPU time: the machine is shared and wall time mostly measures the
// other tenants; with --threads 1 this is the single-core cost of a step.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

constexpr int64_t kHeads = 32, kKvHeads = 8, kDim = 64;  // Llama-3.2-1B attention shape

double decode_tok_s(SequenceCache& c, int64_t ctx, int steps, std::mt19937& rng) {
  const int L = c.num_layers();
  for (int64_t done = 0; done < ctx;) {  // fill in chunks
    const int64_t t = std::min<int64_t>(1024, ctx - done);
    Tensor k = rnd(rng, {t, kKvHeads, kDim}), v = rnd(rng, {t, kKvHeads, kDim});
    for (int l = 0; l < L; ++l) c.layer(l).append(k, v);
    done += t;
  }
  Tensor k = rnd(rng, {1, kKvHeads, kDim}), v = rnd(rng, {1, kKvHeads, kDim}), q = rnd(rng, {1, kHeads, kDim});
  AttnParams p;
  p.scale = 0.125f;
  std::vector<double> times;
  for (int s = 0; s < steps + 1; ++s) {
    const double t0 = cpu_seconds();
    for (int l = 0; l < L; ++l) {
      c.layer(l).append(k, v);
      Tensor o = c.layer(l).attend(q, p);
      if (o.data<float>()[0] == 12345.678f) std::puts("");  // keep the result alive
    }
    if (s) times.push_back(cpu_seconds() - t0);
  }
  std::sort(times.begin(), times.end());
  return 1.0 / times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 4, steps = 8, threads = 0;
  bool decode = true;
  std::vector<int64_t> contexts = {512, 4096, 16384};
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--layers") layers = std::stoi(v);
    else if (a == "--steps") steps = std::stoi(v);
    else if (a == "--dir") dir = v;
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--decode") decode = v != "0";
    else if (a == "--contexts") {
      contexts.clear();
      for (size_t at = 0; at < v.size();) {
        size_t e = v.find(',', at);
        contexts.push_back(std::stoll(v.substr(at, e - at)));
        at = e == std::string::npos ? v.size() : e + 1;
      }
    }
  }
  runtime::init_backends();
  if (threads) cpu::set_num_threads(threads);
  LayerSpec s;
  s.kv_heads = kKvHeads;
  s.head_dim = s.v_head_dim = kDim;
  std::vector<LayerSpec> layout(static_cast<size_t>(layers), s);
  std::printf("layers %d, %lld q heads / %lld kv heads x %lld, bf16 K/V, %d threads, median of %d steps\n", layers,
              static_cast<long long>(kHeads), static_cast<long long>(kKvHeads), static_cast<long long>(kDim),
              cpu::num_threads(), steps);
  std::printf("%-22s", "store \\ context");
  for (int64_t c : contexts) std::printf(" %10lld", static_cast<long long>(c));
  std::printf("   (decode steps per CPU-second)\n");
  struct Cfg {
    const char* name;
    const char* kind;
    int bs;
  };
  const char* only = std::getenv("KV_BENCH_ONLY");
  for (Cfg cfg : std::vector<Cfg>{Cfg{"contiguous", "contiguous", 16}, Cfg{"paged-gather bs16", "paged-gather", 16},
                  Cfg{"paged bs16", "paged", 16}, Cfg{"paged bs32", "paged", 32},
                  Cfg{"kv8 direct bs16", "kv8", 16}, Cfg{"kv4 direct bs16", "kv4", 16}}) {
    if (!decode) break;
    if (only && std::string(cfg.name).find(only) == std::string::npos) continue;
    std::printf("%-22s", cfg.name);
    for (int64_t ctx : contexts) {
      std::mt19937 rng(1);
      std::unique_ptr<SequenceCache> c;
      if (std::string(cfg.kind) == "contiguous") {
        c = make_contiguous_cache(layout, DType::BF16, Device::CPU);
      } else {
        PoolOptions o = pool_options_for(cfg.kind);
        o.block_size = cfg.bs;
        o.initial_blocks = (ctx + 64) / cfg.bs + 1;
        c = Pool::create(layout, DType::BF16, Device::CPU, o)->new_sequence();
      }
      std::printf(" %10.1f", decode_tok_s(*c, ctx, steps, rng));
      std::fflush(stdout);
    }
    std::printf("\n");
  }

  // Snapshots: a long bf16 prefix, written and restored through the page cache.
  {
    std::mt19937 rng(2);
    const int64_t ctx = contexts.back();
    PoolOptions o = pool_options_for("paged");
    o.initial_blocks = ctx / 16 + 2;
    auto pool = Pool::create(layout, DType::BF16, Device::CPU, o);
    auto seq = pool->new_sequence();
    Tensor k = rnd(rng, {ctx, kKvHeads, kDim}), v = rnd(rng, {ctx, kKvHeads, kDim});
    for (int l = 0; l < layers; ++l) seq->layer(l).append(k, v);
    std::vector<int32_t> toks(static_cast<size_t>(ctx), 1);
    SnapshotKey key{"bench", "bench", pool->scheme()};
    const std::string path = dir + "/ingot-kv-bench.ikv";
    auto t0 = Clock::now();
    uint64_t bytes = write_snapshot(path, *seq, toks, key);
    double w = std::chrono::duration<double>(Clock::now() - t0).count();
    auto pool2 = Pool::create(layout, DType::BF16, Device::CPU, o);
    double r = 1e30;
    for (int rep = 0; rep < 3; ++rep) {  // best of three: the first may read from the disk
      t0 = Clock::now();
      auto back = restore_snapshot(path, *pool2, key);
      r = std::min(r, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("snapshot %.1f MiB: write (incl. fsync) %.2f GB/s, restore (best of 3) %.2f GB/s\n",
                static_cast<double>(bytes) / (1 << 20), static_cast<double>(bytes) / w / 1e9,
                static_cast<double>(bytes) / r / 1e9);
    std::filesystem::remove(path);
  }
  return 0;
}
