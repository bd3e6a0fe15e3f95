// server_bench: what the HTTP server costs on top of the engine.
//  1. start-to-ready: tokenizer + weights + engine + listening socket;
//  2. streamed tok/s of the same greedy requests in-process (engine handles)
//     and through HTTP (SSE /v1/completions), one client at a time;
//  3. TTFT through HTTP at 1 / 8 / 64 concurrent streaming clients.
// Usage: server_bench MODEL_DIR [TOKENS_PER_REQUEST=64] [REQUESTS=8] [KV=paged]
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "ingot/engine.h"
#include "io/config.h"
#include "models/model.h"
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
    std::fprintf(stderr, "usage: server_bench MODEL_DIR [TOKENS=64] [REQUESTS=8] [KV=paged]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 64;
  const int requests = argc > 3 ? std::atoi(argv[3]) : 8;
  const std::string kv = argc > 4 ? argv[4] : "paged";
  runtime::init_backends();
  auto t_start = Clock::now();
  auto tok = Tokenizer::from_dir(dir);
  auto t_tok = Clock::now();
  auto model = load_model(dir);
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

  // Warm-up, then in-process vs HTTP, one request at a time.
  http_stream(port, 999, 8);
  double inproc = 0, over_http = 0;
  int64_t n_in = 0, n_http = 0;
  for (int i = 0; i < requests; ++i) {
    engine::Request r;
    r.prompt = prompt_ids(i);
    r.sampling.temperature = 0;
    r.stop.max_tokens = tokens;
    r.stop.ignore_eos = true;
    auto t0 = Clock::now();
    auto h = eng->submit(r);
    engine::Chunk c;
    while (true) {
      if (!h->next(&c, std::chrono::milliseconds(100))) continue;
      n_in += static_cast<int64_t>(c.tokens.size());
      if (c.finished) break;
    }
    inproc += secs(Clock::now() - t0);
    HttpRun hr = http_stream(port, i, tokens);
    over_http += hr.total;
    n_http += hr.chunks - 1;  // the last chunk carries the finish reason
  }
  double tps_in = static_cast<double>(n_in) / inproc, tps_http = static_cast<double>(n_http) / over_http;
  std::printf("streamed tok/s, 1 client: in-process %.1f, HTTP %.1f (overhead %.2f %%)\n", tps_in, tps_http,
              100.0 * (1.0 - tps_http / tps_in));

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
