// `ingot fit MODEL --ctx N [--batch B] [--kv kv8]`: the memory prediction for
// serving a checkpoint, and whether it fits this machine. --measure runs
// that workload (B prompts of N-1 tokens, one generated token each) and
// reports the measured peak RSS beside the prediction.
#include <sys/resource.h>

#include <cstdio>
#include <random>

#include "cli/model_info.h"
#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "runtime/runtime.h"
#include "engine/memory.h"
#include "ingot/engine.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct FitFlags {
  std::string model;
  int64_t ctx = 0;
  int64_t batch = 1;
  std::string kv = "contiguous";
  std::string device = "cpu";
  int64_t token_budget = 2048;
  int64_t prefill_chunk = 512;
  bool measure = false;
  int threads = 0;
};

double gib(int64_t b) { return static_cast<double>(b) / static_cast<double>(1ll << 30); }

int64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

int run_fit(const FitFlags& f) {
  const Device device = parse_device(f.device);
  if (device == Device::CUDA && !runtime::cuda_available())
    fail(ErrorKind::Unsupported, "fit --device cuda: no CUDA device is available");
  if (device == Device::CUDA && f.measure)
    fail(ErrorKind::Unsupported, "fit --measure runs on the CPU only");
  engine::FitQuery q;
  q.ctx = f.ctx;
  q.batch = f.batch;
  q.kv = f.kv;
  q.token_budget = f.token_budget;
  q.prefill_chunk = f.prefill_chunk;
  engine::MemoryPrediction p = predict_model_memory(f.model, q);
  // Weights and KV live on the device chosen; its memory is the bound.
  const int64_t avail = device == Device::CUDA ? runtime::device_memory_bytes(Device::CUDA)
                                               : engine::machine_memory_bytes();
  std::printf("model: %s\n", f.model.c_str());
  std::printf("ctx: %lld  batch: %lld  kv: %s\n", static_cast<long long>(f.ctx), static_cast<long long>(f.batch),
              f.kv.c_str());
  std::printf("weights_bytes: %lld (%.3f GiB)\n", static_cast<long long>(p.weight_bytes), gib(p.weight_bytes));
  std::printf("kv_bytes_per_token: %lld\n", static_cast<long long>(p.kv_bytes_per_token));
  std::printf("kv_bytes: %lld (%.3f GiB)\n", static_cast<long long>(p.kv_bytes), gib(p.kv_bytes));
  std::printf("activation_bytes: %lld (%.3f GiB)\n", static_cast<long long>(p.activation_bytes), gib(p.activation_bytes));
  std::printf("overhead_bytes: %lld (%.3f GiB)\n", static_cast<long long>(p.overhead_bytes), gib(p.overhead_bytes));
  std::printf("predicted_total_bytes: %lld (%.3f GiB)\n", static_cast<long long>(p.total()), gib(p.total()));
  std::printf("%s_memory_bytes: %lld (%.3f GiB)\n", device == Device::CUDA ? "gpu" : "machine",
              static_cast<long long>(avail), gib(avail));
  std::printf("fits: %s\n", p.total() <= avail ? "yes" : "no");
  if (!f.measure) return 0;
  ModelFlags mf;
  mf.model = f.model;
  mf.kv = f.kv;
  mf.threads = f.threads;
  auto model = load_model_from_flags(mf);
  engine::EngineOptions eo;
  eo.kv = f.kv;
  eo.max_concurrency = static_cast<int>(f.batch);
  eo.token_budget = std::max(f.token_budget, f.batch);
  eo.prefill_chunk = f.prefill_chunk;
  eo.context_length = f.ctx;
  eo.prefix_cache = false;
  auto eng = engine::start_engine(*model, eo, nullptr, {});
  std::mt19937 rng(7);
  std::vector<std::shared_ptr<engine::RequestHandle>> hs;
  for (int64_t b = 0; b < f.batch; ++b) {
    engine::Request r;
    for (int64_t i = 0; i < f.ctx - 1; ++i) r.prompt.push_back(static_cast<int32_t>(rng() % model->vocab_size()));
    r.stop.max_tokens = 1;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0;
    hs.push_back(eng->submit(r));
  }
  for (auto& h : hs) {
    engine::Chunk c;
    do {
      if (!h->next(&c, std::chrono::minutes(10))) fail(ErrorKind::Internal, "fit --measure: the workload stalled");
    } while (!c.finished);
    if (c.reason == engine::FinishReason::Error) fail(ErrorKind::Internal, "fit --measure: ", c.error);
  }
  eng->shutdown();
  const int64_t peak = peak_rss_bytes();
  std::printf("measured_peak_rss_bytes: %lld (%.3f GiB)\n", static_cast<long long>(peak), gib(peak));
  std::printf("prediction_error: %+.2f%%\n", 100.0 * (static_cast<double>(p.total()) - peak) / peak);
  return 0;
}

}  // namespace

void register_fit(CLI::App& app) {
  auto f = std::make_shared<FitFlags>();
  CLI::App* sub = add_verb(app, "fit", "predict the memory a model needs and whether it fits", [f] { return run_fit(*f); });
  sub->add_option("model", f->model, "model directory or GGUF file, a cached repo id, or part of a local model's name")
      ->required()
      ->transform([](std::string s) { return resolve_model_arg(s); });
  sub->add_option("--ctx", f->ctx, "context length per sequence")->required();
  sub->add_option("--batch", f->batch, "concurrent sequences")->capture_default_str();
  sub->add_option("--kv", f->kv, "KV cache: contiguous, paged, paged-gather, kv8 or kv4")->capture_default_str();
  sub->add_option("--device", f->device, "cpu or cuda")->capture_default_str();
  sub->add_option("--token-budget", f->token_budget, "tokens per forward pass")->capture_default_str();
  sub->add_option("--prefill-chunk", f->prefill_chunk, "prefill tokens per sequence per pass")->capture_default_str();
  sub->add_option("--threads", f->threads, "CPU threads for --measure (0: all cores)");
  sub->add_flag("--measure", f->measure, "run the workload and report the measured peak RSS");
}

}  // namespace ingot::cli
