// server_bench: what the HTTP server costs on top of the engine.
//  1. start-to-ready: tokenizer + weights + engine + listening socket;
//  2. streamed tok/s of the same greedy requests in-process (engine handles)
//     and through HTTP (SSE /v1/completions), one client at a time, in
//     alternating pairs (median per-pair overhead) plus CPU time per token;
//  3. TTFT through HTTP at 1 / 8 / 64 concurrent streaming clients.
// Usage: server_bench MODEL_DIR|FILE.gguf [TOKENS_PER_REQUEST=64] [REQUESTS=8] [KV=paged] [THREADS=0 (all cores)]
#include <httplib.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "ingot/engine.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "models/gguf_source.h"
#include "models/model.h"
#include "backend/cpu/thread_pool.h"
#include "runtime/runtime.h"
#include "server/http_app.h"
#include "server/service.h"
#include "tokenizer/tokenizer.h"

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Decoder : public engine::TextDecoder {
 public:
  explicit Decoder(const Tokenizer& t) : t_(t) {}
  struct S : Stream {
    std::unique_ptr<Tokenizer::Stream> s;
    std::string push(int32_t id) override { return s->push(id); }
    std::string flush() override { return s->flush(); }
  };
  std::unique_ptr<Stream> stream(bool skip) const override {
    auto s = std::make_unique<S>();
    s->s = t_.stream(skip);
    return s;
  }

 private:
  const Tokenizer& t_;
};

std::vector<int32_t> prompt_ids(int i) {
  std::vector<int32_t> p;
  for (int k = 0; k < 32; ++k) p.push_back(1000 + (i * 37 + k * 11) % 5000);
  return p;
}

// One streamed completion over HTTP; returns (ttft, total seconds, chunks).
struct HttpRun {
  double ttft = 0, total = 0;
  int64_t chunks = 0;
};
HttpRun http_stream(int port, int i, int64_t tokens) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(600, 0);
  nlohmann::json body = {{"prompt", prompt_ids(i)}, {"max_tokens", tokens}, {"temperature", 0},
                         {"ignore_eos", true}, {"stream", true}};
  HttpRun r;
  auto t0 = Clock::now();
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data: {", 0) != 0) continue;
      if (r.chunks++ == 0) r.ttft = secs(Clock::now() - t0);
    }
    return true;
  };
  cli.send(req);
  r.total = secs(Clock::now() - t0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: server_bench MODEL_DIR|FILE.gguf [TOKENS=64] [REQUESTS=8] [KV=paged] [THREADS=0]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 64;
  const int requests = argc > 3 ? std::atoi(argv[3]) : 8;
  const std::string kv = argc > 4 ? argv[4] : "paged";
  if (argc > 5 && std::atoi(argv[5]) > 0) cpu::set_num_threads(std::atoi(argv[5]));
  runtime::init_backends();
  auto t_start = Clock::now();
  // A GGUF file (the SmolLM2 fixture) carries its tokenizer in its metadata.
  const bool gguf = is_gguf_path(dir);
  std::unique_ptr<Tokenizer> tok;
  if (gguf) {
    GgufTokenizerFiles files = gguf_tokenizer_files(*GgufFile::open(dir));
    tok = Tokenizer::from_json(files.tokenizer_json, files.tokenizer_config_json);
  } else {
    tok = Tokenizer::from_dir(dir);
  }
  auto t_tok = Clock::now();
  auto model = gguf ? load_gguf_model(dir, {}) : load_model(dir);
  auto t_model = Clock::now();
  engine::EngineOptions eo;
  eo.kv = kv;
  auto eng = engine::start_engine(*model, eo, std::make_shared<Decoder>(*tok), {});
  auto t_engine = Clock::now();
  server::ServeOptions so;
  so.port = 0;
  so.context_length = model->config().max_position_embeddings;
  server::Service svc(*eng, *tok, nullptr, so);
  server::Router router(svc);
  std::atomic<bool> stop{false};
  std::atomic<int> port{0};
  double ready_s = 0;
  std::thread http([&] {
    server::serve_http(router, svc, [&](int p) {
      ready_s = secs(Clock::now() - t_start);
      port = p;
    }, stop);
  });
  while (port.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::printf("start-to-ready: %.3f s (tokenizer %.3f, weights %.3f, engine %.3f, socket %.3f)\n", ready_s,
              secs(t_tok - t_start), secs(t_model - t_tok), secs(t_engine - t_model),
              ready_s - secs(t_engine - t_start));

  // Warm-up, then in-process vs HTTP, one request at a time, in pairs whose
  // order alternates (in-process first on even pairs, HTTP first on odd), so a
  // load change on a shared machine lands on both sides alike. The overhead is
  // the median over pairs of 1 - tok/s(HTTP) / tok/s(in-process); the process
  // CPU per token of each side (the HTTP side includes this client) is the
  // load-independent view.
  http_stream(port, 999, 8);
  auto cpu_now = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  std::vector<double> overhead;
  double wall_in = 0, wall_http = 0, cpu_in = 0, cpu_http = 0;
  int64_t n_in = 0, n_http = 0;
  for (int i = 0; i < requests; ++i) {
    double tps_in = 0, tps_http = 0;
    auto in_process = [&] {
      engine::Request r;
      r.prompt = prompt_ids(i);
      r.sampling.temperature = 0;
      r.stop.max_tokens = tokens;
      r.stop.ignore_eos = true;
      const double c0 = cpu_now();
      auto t0 = Clock::now();
      auto h = eng->submit(r);
      engine::Chunk c;
      int64_t n = 0;
      while (true) {
        if (!h->next(&c, std::chrono::milliseconds(100))) continue;
        n += static_cast<int64_t>(c.tokens.size());
        if (c.finished) break;
      }
      const double w = secs(Clock::now() - t0);
      cpu_in += cpu_now() - c0;
      wall_in += w;
      n_in += n;
      tps_in = static_cast<double>(n) / w;
    };
    auto over_http = [&] {
      const double c0 = cpu_now();
      HttpRun hr = http_stream(port, i, tokens);
      cpu_http += cpu_now() - c0;
      wall_http += hr.total;
      n_http += hr.chunks - 1;  // the last chunk carries the finish reason
      tps_http = static_cast<double>(hr.chunks - 1) / hr.total;
    };
    if (i % 2 == 0) {
      in_process();
      over_http();
    } else {
      over_http();
      in_process();
    }
    overhead.push_back(100.0 * (1.0 - tps_http / tps_in));
  }
  std::vector<double> sorted = overhead;
  std::sort(sorted.begin(), sorted.end());
  const double med = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                       : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  std::printf("streamed tok/s, 1 client, %d alternating pairs: in-process %.1f, HTTP %.1f (pooled); overhead per pair "
              "median %.2f %% (min %.2f, max %.2f)\n",
              requests, static_cast<double>(n_in) / wall_in, static_cast<double>(n_http) / wall_http, med,
              sorted.front(), sorted.back());
  std::printf("process CPU per streamed token: in-process %.3f ms, HTTP (server + this client) %.3f ms (%+.2f %%)\n",
              1000 * cpu_in / static_cast<double>(n_in), 1000 * cpu_http / static_cast<double>(n_http),
              100.0 * ((cpu_http / static_cast<double>(n_http)) / (cpu_in / static_cast<double>(n_in)) - 1.0));

  for (int clients : {1, 8, 64}) {
    std::vector<HttpRun> runs(static_cast<size_t>(clients));
    std::vector<std::thread> ts;
    for (int i = 0; i < clients; ++i) ts.emplace_back([&, i] { runs[static_cast<size_t>(i)] = http_stream(port, i, 16); });
    for (auto& t : ts) t.join();
    std::vector<double> ttft;
    for (auto& r : runs) ttft.push_back(r.ttft);
    std::sort(ttft.begin(), ttft.end());
    std::printf("TTFT over HTTP, %2d concurrent clients: median %.1f ms, max %.1f ms\n", clients,
                1000 * ttft[ttft.size() / 2], 1000 * ttft.back());
  }
  stop = true;
  http.join();
  eng->shutdown();
  return 0;
}
