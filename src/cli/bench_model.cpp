// `ingot bench model`: llama-bench's pp / tg figures, measured through the
// engine exactly as `ingot serve` drives it (start_engine + submit, the same
// scheduler, KV pool and prefix cache), not through a separate forward loop.
// Depth D: each sequence's first D tokens are prefilled beforehand and reused
// from the prefix cache; batch B: B requests run in the engine together.
#include "cli/bench_model.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "cli/model_setup.h"
#include "cli/verbs.h"
#include "ingot/engine.h"
#include "loadgen/plan.h"
#include "loadgen/report.h"
#include "loadgen/stats.h"
#include "models/lora.h"
#include "runtime/runtime.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct BenchModelFlags {
  ModelFlags model;
  std::string model_arg;  // the positional MODEL
  std::string n_prompt = "512";
  std::string n_gen = "128";
  std::string depth = "0";
  std::string batch = "1";
  int64_t repetitions = 3;
  int64_t ctx = 0;
  double memory_budget_gb = 0;
  uint64_t seed = 0;
  std::string json_out;
  std::vector<std::string> loras;  // adapters taken by the requests in turn
  int max_lora_rank = 64;
};

// A batch of sequences run together: when each token of each sequence
// arrived (seconds from the batch's submission), and how each one ended.
struct BatchTrace {
  std::vector<std::vector<double>> arrivals;
  std::vector<engine::Usage> usage;
};

using Enough = std::function<bool(const std::vector<std::vector<double>>& arrivals)>;

// Submits every request at once and records each token's arrival on a
// reader thread per request (blocked reads: exact times, no polling). Runs
// until all finish, or until `enough` holds (the rest are then cancelled).
BatchTrace run_together(engine::Engine& eng, std::vector<engine::Request> reqs, const Enough& enough) {
  const size_t n = reqs.size();
  const auto t0 = Clock::now();
  std::vector<std::shared_ptr<engine::RequestHandle>> handles;
  for (auto& r : reqs) handles.push_back(eng.submit(std::move(r)));
  std::mutex mu;
  std::condition_variable cv;
  BatchTrace trace;
  trace.arrivals.resize(n);
  trace.usage.resize(n);
  std::vector<std::string> errors(n);
  size_t finished = 0;
  std::vector<std::thread> readers;
  for (size_t i = 0; i < n; ++i)
    readers.emplace_back([&, i] {
      while (true) {
        engine::Chunk c;
        if (!handles[i]->next(&c, std::chrono::milliseconds(100))) continue;
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        std::lock_guard<std::mutex> g(mu);
        trace.arrivals[i].insert(trace.arrivals[i].end(), c.tokens.size(), t);
        if (c.finished) {
          trace.usage[i] = c.usage;
          if (c.reason == engine::FinishReason::Error) errors[i] = c.error.empty() ? "unknown error" : c.error;
          ++finished;
        }
        cv.notify_all();
        if (c.finished) return;
      }
    });
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return finished == n || (enough && enough(trace.arrivals)); });
  }
  for (auto& h : handles) h->cancel();  // no-op for the finished ones
  for (auto& r : readers) r.join();
  for (const std::string& e : errors)
    if (!e.empty()) fail(ErrorKind::Internal, "the engine failed a request: ", e);
  return trace;
}

struct Measure {
  double tokens_per_s = 0;
  double seconds = 0;
  int64_t tokens = 0;
  int64_t cached_depth = 0;  // depth tokens every sequence reused from the prefix cache
};

class EngineBench {
 public:
  EngineBench(engine::Engine& eng, int64_t vocab, int64_t context, uint64_t seed,
              std::vector<std::shared_ptr<const LoraAdapter>> adapters)
      : eng_(eng), vocab_(vocab), context_(context), rng_(seed), adapters_(std::move(adapters)) {}

  // Prefill of `p` tokens after `depth` tokens already in the cache, for
  // `batch` sequences at once: prompt tokens computed / time to the last
  // sequence's first token.
  Measure pp(int64_t p, int64_t depth, int64_t batch) {
    need_room(depth + p + 1, "pp", p, depth);
    std::vector<engine::Request> reqs = requests(prefilled(batch, depth), p, 1);
    BatchTrace trace = run_together(eng_, std::move(reqs), nullptr);
    Measure m;
    m.cached_depth = depth;
    for (size_t i = 0; i < trace.arrivals.size(); ++i) {
      if (trace.arrivals[i].empty()) fail(ErrorKind::Internal, "a prefill produced no token");
      m.seconds = std::max(m.seconds, trace.arrivals[i].front());
      m.tokens += trace.usage[i].prompt_tokens - trace.usage[i].cached_prompt_tokens;
      m.cached_depth = std::min(m.cached_depth, trace.usage[i].cached_prompt_tokens);
    }
    m.tokens_per_s = m.seconds > 0 ? static_cast<double>(m.tokens) / m.seconds : 0;
    return m;
  }

  // Decode of `n` tokens per sequence at context depth `depth`, `batch`
  // sequences together: tokens over the window in which all of them decode.
  Measure tg(int64_t n, int64_t depth, int64_t batch) {
    const int64_t prompt = depth + 1;
    need_room(prompt + n, "tg", n, depth);
    // Room for sequences that start decoding a few steps apart; the batch is
    // cancelled once the window is complete.
    const int64_t max_tokens = std::min(n + batch + 8, context_ - prompt);
    std::vector<engine::Request> reqs = requests(prefilled(batch, depth), 1, max_tokens);
    BatchTrace trace = run_together(eng_, std::move(reqs), [n](const std::vector<std::vector<double>>& arrivals) {
      return loadgen::decode_window_full(arrivals, n);
    });
    loadgen::DecodeWindow w = loadgen::decode_window(trace.arrivals, n);
    if (w.tokens == 0) fail(ErrorKind::Internal, "tg", n, " at depth ", depth, ": no decode window was measured");
    Measure m;
    m.tokens = w.tokens;
    m.seconds = w.seconds;
    m.tokens_per_s = w.tokens_per_s();
    m.cached_depth = depth;
    for (const engine::Usage& u : trace.usage) m.cached_depth = std::min(m.cached_depth, u.cached_prompt_tokens);
    return m;
  }

 private:
  void need_room(int64_t tokens, const char* test, int64_t n, int64_t depth) const {
    if (tokens > context_)
      fail(ErrorKind::InvalidArgument, test, n, " at depth ", depth, " needs ", tokens,
           " tokens of context; the engine has ", context_, " (--ctx)");
  }

  std::vector<int32_t> random_ids(int64_t n) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab_ - 1));
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = pick(rng_);
    return v;
  }

  // `batch` fresh prompts of `depth` tokens, prefilled so that the prefix
  // cache holds them (nothing to do at depth 0).
  std::vector<std::vector<int32_t>> prefilled(int64_t batch, int64_t depth) {
    std::vector<std::vector<int32_t>> prefixes;
    for (int64_t b = 0; b < batch; ++b) prefixes.push_back(random_ids(depth));
    if (depth > 0) run_together(eng_, requests(prefixes, 0, 1), nullptr);
    return prefixes;
  }

  // Each prefix plus `extra` fresh tokens, generating `max_tokens` greedily;
  // sequence k takes adapter k modulo their count (the same one for its
  // depth prefix, which the prefix cache keys on).
  std::vector<engine::Request> requests(const std::vector<std::vector<int32_t>>& prefixes, int64_t extra,
                                        int64_t max_tokens) {
    std::vector<engine::Request> reqs;
    for (const auto& prefix : prefixes) {
      engine::Request r;
      if (!adapters_.empty()) r.lora = adapters_[reqs.size() % adapters_.size()];
      r.prompt = prefix;
      std::vector<int32_t> more = random_ids(extra);
      r.prompt.insert(r.prompt.end(), more.begin(), more.end());
      r.stop.max_tokens = max_tokens;
      r.stop.ignore_eos = true;
      r.sampling.temperature = 0;
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  engine::Engine& eng_;
  int64_t vocab_;
  int64_t context_;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<const LoraAdapter>> adapters_;
};

struct Row {
  std::string test;  // "pp512" / "tg128"
  int64_t tokens = 0, depth = 0, batch = 0;
  std::vector<Measure> runs;  // after the warm-up
};

std::vector<int64_t> list_flag(const std::string& s, const char* what, bool allow_zero) {
  std::vector<int64_t> out;
  for (int32_t v : parse_int_list(s, what)) {
    if (v < 0 || (v == 0 && !allow_zero))
      fail(ErrorKind::InvalidArgument, what, " values must be ", allow_zero ? ">= 0" : "> 0", ", got ", v);
    out.push_back(v);
  }
  if (out.empty()) fail(ErrorKind::InvalidArgument, what, " needs at least one value");
  return out;
}

json row_json(const Row& r) {
  std::vector<double> rates, secs;
  json runs = json::array();
  int64_t cached = r.depth;
  for (const Measure& m : r.runs) {
    rates.push_back(m.tokens_per_s);
    secs.push_back(m.seconds);
    cached = std::min(cached, m.cached_depth);
    runs.push_back({{"tokens_per_s", m.tokens_per_s}, {"seconds", m.seconds}, {"tokens", m.tokens},
                    {"cached_depth", m.cached_depth}});
  }
  return {{"test", r.test},
          {"kind", r.test.substr(0, 2)},
          {"n_tokens", r.tokens},
          {"depth", r.depth},
          {"batch", r.batch},
          {"tokens_per_s", loadgen::median(rates)},
          {"seconds", loadgen::median(secs)},
          {"cached_depth", cached},
          {"runs", runs}};
}

int run_bench_model(BenchModelFlags f) {
  if (f.model_arg.empty() == f.model.model.empty())
    fail(ErrorKind::InvalidArgument, "give the model once: as MODEL or as --model");
  if (f.model.model.empty()) f.model.model = f.model_arg;
  if (f.repetitions < 1) fail(ErrorKind::InvalidArgument, "--repetitions must be >= 1");
  if (f.ctx < 0) fail(ErrorKind::InvalidArgument, "--ctx must be >= 0");
  const auto pps = list_flag(f.n_prompt, "--n-prompt", true);
  const auto tgs = list_flag(f.n_gen, "--n-gen", true);
  const auto depths = list_flag(f.depth, "--depth", true);
  const auto batches = list_flag(f.batch, "--batch", false);
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());

  auto model = load_model_from_flags(f.model);
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  for (const std::string& dir : f.loras) adapters.push_back(load_lora_adapter(*model, dir, {f.max_lora_rank}));
  engine::EngineOptions eo;  // serve's defaults, with room for the largest batch
  eo.max_concurrency = static_cast<int>(std::max<int64_t>(eo.max_concurrency, max_batch));
  eo.token_budget = std::max<int64_t>(eo.token_budget, max_batch);
  eo.max_queue = std::max<int64_t>(eo.max_queue, max_batch);
  eo.context_length = f.ctx;
  eo.memory_budget_gb = f.memory_budget_gb;
  if (model->device() != Device::CPU) eo.device_memory_bytes = runtime::device_memory_bytes(model->device());
  eo.kv = f.model.kv;
  if (f.model.enforce_eager) eo.step_graphs = "off";
  eo.prefix_cache_entries = 0;  // every batch's depth prefixes stay (memory permitting)
  auto eng = engine::start_engine(*model, eo, nullptr, {});
  const int64_t context = f.ctx > 0 ? f.ctx : model->config().max_position_embeddings;
  EngineBench bench(*eng, model->vocab_size(), context, f.seed, adapters);

  std::vector<Row> rows;
  for (int64_t b : batches)
    for (int64_t d : depths) {
      for (int64_t p : pps)
        if (p > 0) rows.push_back({"pp" + std::to_string(p), p, d, b, {}});
      for (int64_t n : tgs)
        if (n > 0) rows.push_back({"tg" + std::to_string(n), n, d, b, {}});
    }
  if (rows.empty()) fail(ErrorKind::InvalidArgument, "nothing to measure: --n-prompt and --n-gen are all 0");

  std::vector<std::vector<std::string>> cells;
  std::string notes;
  for (Row& r : rows) {
    for (int64_t rep = 0; rep <= f.repetitions; ++rep) {  // rep 0: the warm-up
      Measure m = r.test[0] == 'p' ? bench.pp(r.tokens, r.depth, r.batch) : bench.tg(r.tokens, r.depth, r.batch);
      if (rep > 0) r.runs.push_back(m);
    }
    json j = row_json(r);
    cells.push_back({r.test, std::to_string(r.depth), std::to_string(r.batch),
                     loadgen::fixed(j["tokens_per_s"].get<double>(), 2), loadgen::fixed(j["seconds"].get<double>(), 4)});
    std::fprintf(stderr, "bench model: %s at depth %lld, batch %lld: %.2f tok/s\n", r.test.c_str(),
                 static_cast<long long>(r.depth), static_cast<long long>(r.batch), j["tokens_per_s"].get<double>());
    if (r.test[0] == 'p' && j["cached_depth"].get<int64_t>() < r.depth)
      notes += str_cat(r.test, " at depth ", r.depth, ", batch ", r.batch, ": only ", j["cached_depth"].get<int64_t>(),
                       " depth tokens came from the prefix cache; the rest were prefilled and counted\n");
  }
  eng->shutdown();
  std::printf("model: %s, kv %s, device %s, %zu LoRA adapter(s), median of %lld runs after a warm-up\n",
              f.model.model.c_str(), f.model.kv.c_str(), device_name(model->device()), f.loras.size(),
              static_cast<long long>(f.repetitions));
  std::fputs(loadgen::format_table({"test", "depth", "batch", "tok/s", "seconds"}, cells).c_str(), stdout);
  std::fputs(notes.c_str(), stdout);
  if (!f.json_out.empty()) {
    json results = json::array();
    for (const Row& r : rows) results.push_back(row_json(r));
    json out = {{"model", f.model.model}, {"device", device_name(model->device())},  {"kv", f.model.kv},
                {"threads", f.model.threads}, {"context", context},     {"repetitions", f.repetitions},
                {"seed", f.seed},             {"loras", f.loras},           {"results", results}};
    std::ofstream file(f.json_out);
    file << out.dump(2) << "\n";
    if (!file) fail(ErrorKind::Io, "cannot write ", f.json_out);
  }
  return 0;
}

}  // namespace

void register_bench_model(CLI::App& bench) {
  auto f = std::make_shared<BenchModelFlags>();
  f->model.kv = "paged";  // serve's default
  CLI::App* sub = add_verb(bench, "model", "prefill (pp) and decode (tg) rates through the engine, llama-bench style",
                           [f] { return run_bench_model(*f); });
  sub->add_option("MODEL", f->model_arg, "model directory or GGUF file, a cached repo id, or part of a local model's name")
      ->transform([](std::string s) { return resolve_model_arg(s); });
  add_model_flags(sub, f->model, false);
  sub->add_option("-p,--n-prompt", f->n_prompt, "prompt tokens per pp test, comma-separated (0: no pp test)")
      ->capture_default_str();
  sub->add_option("-n,--n-gen", f->n_gen, "generated tokens per tg test, comma-separated (0: no tg test)")
      ->capture_default_str();
  sub->add_option("-d,--depth", f->depth, "context tokens already in the cache, comma-separated")->capture_default_str();
  sub->add_option("-b,--batch", f->batch, "sequences in the engine at once, comma-separated")->capture_default_str();
  sub->add_option("-r,--repetitions", f->repetitions, "timed runs per test (after one warm-up); the median is reported")
      ->capture_default_str();
  sub->add_option("--ctx", f->ctx, "context length (0: the model's)");
  sub->add_option("--memory-budget", f->memory_budget_gb, "GB for weights + KV cache (0: machine memory)");
  sub->add_option("--seed", f->seed, "seed of the random prompt ids")->capture_default_str();
  sub->add_option("--json", f->json_out, "also write every run's numbers to FILE")->type_name("FILE");
  sub->add_option("--lora", f->loras,
                  "LoRA adapter folder (PEFT or MLX-LM), repeatable: the sequences of a batch take them in turn")
      ->type_name("DIR");
  sub->add_option("--max-lora-rank", f->max_lora_rank, "largest adapter rank accepted")->capture_default_str();
}

}  // namespace ingot::cli
