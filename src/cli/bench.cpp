// `ingot bench serve`: load against any OpenAI-compatible server over HTTP
// (vllm bench serve's measures), and the `ingot bench` verb group.
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>

#include "cli/bench_model.h"
#include "cli/verbs.h"
#include "loadgen/client.h"
#include "loadgen/plan.h"
#include "loadgen/report.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

// Exit status when the run finished but some requests failed.
constexpr int kExitRequestsFailed = 3;

struct BenchServeFlags {
  std::string url;
  std::string model;
  std::string api_key;
  std::string concurrency;
  std::string request_rate;
  int64_t max_concurrency = 0;
  int64_t num_prompts = 0;
  int64_t input_len = 128;
  int64_t output_len = 128;
  int64_t prefix_len = 0;
  std::string vocab_range = "1000:30000";
  uint64_t seed = 0;
  bool seed_given = false;
  double timeout_s = 600;
  std::string extra_body;
  std::string json_out;
};

// One level of the run: how many requests, and how they are let in.
struct LevelPlan {
  int64_t requests = 0;
  int64_t concurrency = 0;
  double rate = 0;  // 0: a closed loop at `concurrency`
};

std::vector<LevelPlan> plan_levels(const BenchServeFlags& f) {
  std::vector<LevelPlan> levels;
  if (!f.request_rate.empty()) {
    if (!f.concurrency.empty())
      fail(ErrorKind::InvalidArgument, "give --concurrency or --request-rate, not both (--max-concurrency caps a rate)");
    for (double r : loadgen::parse_rates(f.request_rate, "--request-rate"))
      levels.push_back({f.num_prompts > 0 ? f.num_prompts : 100, f.max_concurrency, r});
    return levels;
  }
  if (f.max_concurrency != 0) fail(ErrorKind::InvalidArgument, "--max-concurrency goes with --request-rate");
  for (int64_t c : loadgen::parse_positive_ints(f.concurrency.empty() ? "1" : f.concurrency, "--concurrency"))
    levels.push_back({f.num_prompts > 0 ? f.num_prompts : std::max<int64_t>(8, 4 * c), c, 0});
  return levels;
}

void check_flags(const BenchServeFlags& f) {
  if (f.input_len < 0 || f.prefix_len < 0 || f.input_len + f.prefix_len < 1)
    fail(ErrorKind::InvalidArgument, "--input-len and --prefix-len must be >= 0, and a prompt needs a token");
  if (f.output_len < 1) fail(ErrorKind::InvalidArgument, "--output-len must be >= 1");
  if (f.num_prompts < 0) fail(ErrorKind::InvalidArgument, "--num-prompts must be >= 0");
  if (f.max_concurrency < 0) fail(ErrorKind::InvalidArgument, "--max-concurrency must be >= 0");
  if (!(f.timeout_s > 0)) fail(ErrorKind::InvalidArgument, "--timeout must be > 0");
}

nlohmann::json parse_extra_body(const std::string& s) {
  if (s.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  if (!j.is_object()) fail(ErrorKind::InvalidArgument, "--extra-body must be a JSON object");
  return j;
}

// One short request before the run: a server that cannot complete it (wrong
// model, no token-id prompts, bad key) fails the run with its own message.
void probe(const loadgen::ServerTarget& target, const loadgen::PromptSpec& spec, uint64_t seed) {
  loadgen::PromptSpec small = spec;
  small.prefix_len = 0;
  small.input_len = 4;
  auto prompts = loadgen::make_prompts(small, 1, seed, std::numeric_limits<uint64_t>::max());
  loadgen::LevelRun run = loadgen::run_level(target, prompts, 2, {1, {0.0}});
  const loadgen::RequestResult& r = run.results[0];
  if (!r.ok())
    fail(ErrorKind::Io, "the server did not complete a test request (", loadgen::failure_name(r.failure), "): ", r.error);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) fail(ErrorKind::Io, "cannot write ", path);
}

int run_bench_serve(const BenchServeFlags& f) {
  check_flags(f);
  const std::vector<LevelPlan> levels = plan_levels(f);
  loadgen::PromptSpec spec;
  spec.input_len = f.input_len;
  spec.prefix_len = f.prefix_len;
  spec.range = loadgen::parse_token_range(f.vocab_range);
  loadgen::ServerTarget target;
  target.url = f.url;
  loadgen::endpoint_urls(f.url);  // a malformed URL fails before anything is sent
  target.api_key = f.api_key;
  target.timeout_s = f.timeout_s;
  target.extra_body = parse_extra_body(f.extra_body);
  target.model = f.model.empty() ? loadgen::discover_model(target) : f.model;
  // A fresh seed per run unless asked: a rerun's prompts would otherwise hit
  // the server's prefix cache and flatter its TTFT.
  const uint64_t seed = f.seed_given ? f.seed : std::random_device{}();
  probe(target, spec, seed);
  std::fprintf(stderr, "bench serve: %s, model %s, seed %llu\n", target.url.c_str(), target.model.c_str(),
               static_cast<unsigned long long>(seed));

  std::vector<loadgen::LevelReport> reports;
  for (size_t k = 0; k < levels.size(); ++k) {
    const LevelPlan& lp = levels[k];
    auto prompts = loadgen::make_prompts(spec, lp.requests, seed, k);
    loadgen::LevelLoad load;
    load.max_concurrency = lp.concurrency;
    load.arrivals = lp.rate > 0 ? loadgen::poisson_arrivals(lp.requests, lp.rate, seed + k)
                                : std::vector<double>(static_cast<size_t>(lp.requests), 0.0);
    loadgen::LevelRun run = loadgen::run_level(target, prompts, f.output_len, load);
    loadgen::LevelReport rep;
    rep.concurrency = lp.concurrency;
    rep.request_rate = lp.rate;
    rep.summary = loadgen::summarize(run.results, run.duration_s, f.output_len);
    rep.results = std::move(run.results);
    std::fprintf(stderr, "bench serve: level %zu/%zu done: %lld requests, %lld failed, %.2f s\n", k + 1, levels.size(),
                 static_cast<long long>(rep.summary.requests), static_cast<long long>(rep.summary.errors()),
                 rep.summary.duration_s);
    reports.push_back(std::move(rep));
  }

  std::fputs(loadgen::serve_report_text(reports, f.output_len).c_str(), stdout);
  std::fflush(stdout);
  int64_t errors = 0;
  for (const auto& r : reports) errors += r.summary.errors();
  if (!f.json_out.empty()) {
    nlohmann::json levels_json = nlohmann::json::array();
    for (const auto& r : reports) levels_json.push_back(loadgen::level_json(r));
    write_json(f.json_out, {{"url", target.url},
                            {"endpoint", loadgen::endpoint_urls(target.url).completions},
                            {"model", target.model},
                            {"input_len", f.input_len},
                            {"output_len", f.output_len},
                            {"prefix_len", f.prefix_len},
                            {"vocab_range", {spec.range.lo, spec.range.hi}},
                            {"seed", seed},
                            {"timeout_s", f.timeout_s},
                            {"errors", errors},
                            {"levels", std::move(levels_json)}});
  }
  return errors > 0 ? kExitRequestsFailed : 0;
}

void register_bench_serve(CLI::App& bench) {
  auto f = std::make_shared<BenchServeFlags>();
  CLI::App* sub = add_verb(bench, "serve", "measure an OpenAI-compatible server over HTTP (TTFT, TPOT, ITL, tok/s)",
                           [f] { return run_bench_serve(*f); });
  sub->footer("Exit status: 0 when every request completed; 3 when some failed (the report is still written); "
              "1 when the run could not start. See docs/benchmarking.md.");
  sub->add_option("--url", f->url, "the server's base URL, e.g. http://127.0.0.1:8080")->required();
  sub->add_option("--model", f->model, "model name sent with each request (default: the server's first /v1/models)");
  sub->add_option("--api-key", f->api_key, "sent as 'Authorization: Bearer KEY'");
  sub->add_option("--concurrency", f->concurrency, "requests in flight, one level per value: 1,8,64 (default 1)");
  sub->add_option("--request-rate", f->request_rate, "Poisson arrivals instead, requests/s per level: 2,8 or inf");
  sub->add_option("--max-concurrency", f->max_concurrency, "cap on requests in flight with --request-rate (0: none)");
  sub->add_option("--num-prompts", f->num_prompts,
                  "requests per level (default: 4 x concurrency, at least 8; 100 per request rate)");
  sub->add_option("--input-len", f->input_len, "random prompt tokens per request (after the prefix)")
      ->capture_default_str();
  sub->add_option("--output-len", f->output_len, "tokens generated per request (ignore_eos)")->capture_default_str();
  sub->add_option("--prefix-len", f->prefix_len, "tokens every prompt starts with (shared-prefix workload)")
      ->capture_default_str();
  sub->add_option("--vocab-range", f->vocab_range, "token ids prompts are drawn from, LO:HI (HI excluded)")
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "prompt and arrival seed (default: a fresh one, printed)")
      ->each([f](const std::string&) { f->seed_given = true; });
  sub->add_option("--timeout", f->timeout_s, "seconds one request may take")->capture_default_str();
  sub->add_option("--extra-body", f->extra_body, "JSON object merged into every request body");
  sub->add_option("--json", f->json_out, "also write every number, per level and per request, to FILE")
      ->type_name("FILE");
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: a served model over HTTP, or the engine in-process");
  bench->require_subcommand(1);
  register_bench_serve(*bench);
  register_bench_model(*bench);
}

}  // namespace ingot::cli
