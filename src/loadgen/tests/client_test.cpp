// The HTTP driver against a scripted server on a loopback socket: each
// request's body names how the server behaves (through the extra body), so
// every failure kind is produced for real: HTTP errors, resets, timeouts,
// malformed and unfinished streams, and a port nobody listens on.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "loadgen/client.h"
#include "util/error.h"

namespace ingot::loadgen {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string http_chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string event(const std::string& text, const char* finish = nullptr) {
  json c = {{"choices", json::array({{{"index", 0}, {"text", text}, {"finish_reason", finish ? json(finish) : json()}}})},
            {"usage", nullptr}};
  return "data: " + c.dump() + "\n\n";
}

// Answers one request per connection as its body's "scenario" says.
class ScriptedServer {
 public:
  ScriptedServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0) std::abort();
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] { accept_loop(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    accept_.join();
    for (auto& t : workers_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() const { return max_in_flight_.load(); }
  // "ok" streams wait (up to 5 s) until this many requests were in flight at
  // once, so a test of the concurrency cap does not depend on the scheduler.
  void hold_until_in_flight(int n) { hold_until_ = n; }
  std::vector<json> bodies() {
    std::lock_guard<std::mutex> g(mu_);
    return bodies_;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::lock_guard<std::mutex> g(mu_);
      workers_.emplace_back([this, c] { serve(c); });
    }
  }

  // The request line, headers and body of one request (Content-Length framed).
  static bool read_request(int c, std::string& head, std::string& body) {
    std::string buf;
    char tmp[4096];
    size_t end = std::string::npos;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    head = buf.substr(0, end);
    body = buf.substr(end + 4);
    size_t cl = head.find("Content-Length: ");
    size_t want = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
    while (body.size() < want) {
      ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      body.append(tmp, static_cast<size_t>(n));
    }
    return true;
  }

  void serve(int c) {
    const int now = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    std::string head, body;
    bool left = false;
    // A request stops counting before its last bytes go out: the client may
    // open its next request the moment they arrive.
    auto leave = [&] {
      if (!left) --in_flight_;
      left = true;
    };
    if (read_request(c, head, body)) answer(c, head, body, leave);
    leave();
    ::close(c);
  }

  template <class Leave>
  void answer(int c, const std::string& head, const std::string& raw, Leave& leave) {
    const std::string ok_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if (head.rfind("GET /v1/models", 0) == 0) {
      std::string b = R"({"object":"list","data":[{"id":"scripted-model","object":"model"}]})";
      send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                      std::to_string(b.size()) + "\r\n\r\n" + b);
      return;
    }
    json body = json::parse(raw);
    {
      std::lock_guard<std::mutex> g(mu_);
      bodies_.push_back(body);
    }
    const std::string scenario = body.value("scenario", "ok");
    const int64_t n = body.value("max_tokens", 1);
    if (scenario == "http500") {
      std::string b = R"({"error":{"message":"boom","type":"server_error"}})";
      send_all(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nConnection: close\r\n"
                  "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b);
      return;
    }
    send_all(c, ok_head);
    if (scenario == "slow") {
      std::this_thread::sleep_for(3s);
      return;
    }
    if (scenario == "malformed") {
      send_all(c, http_chunk("data: {not json\n\n"));
      std::this_thread::sleep_for(300ms);  // the client must not wait for the rest
      send_all(c, http_chunk("data: [DONE]\n\n") + "0\r\n\r\n");
      return;
    }
    for (int w = 0; w < 5000 && max_in_flight_.load() < hold_until_.load() && !stop_; ++w)
      std::this_thread::sleep_for(1ms);
    const bool reset = scenario == "reset", unfinished = scenario == "unfinished";
    const int64_t send = scenario == "short" ? n - 1 : n;
    for (int64_t i = 0; i < send; ++i) {
      if (reset && i == 2) {
        linger l{1, 0};  // close with a RST, as a killed process's socket does
        ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        return;
      }
      send_all(c, http_chunk(event("t", !unfinished && i + 1 == send ? "length" : nullptr)));
      std::this_thread::sleep_for(2ms);
    }
    if (unfinished) {
      send_all(c, "0\r\n\r\n");
      return;
    }
    if (scenario != "no_usage") {
      json usage = {{"prompt_tokens", body["prompt"].size()}, {"completion_tokens", send}};
      json u = {{"choices", json::array()}, {"usage", usage}};
      send_all(c, http_chunk("data: " + u.dump() + "\n\n"));
    }
    leave();
    send_all(c, http_chunk("data: [DONE]\n\n") + "0\r\n\r\n");
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> in_flight_{0}, max_in_flight_{0}, hold_until_{0};
  std::thread accept_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::vector<json> bodies_;
};

ServerTarget target(const ScriptedServer& s, const std::string& scenario) {
  ServerTarget t;
  t.url = s.url();
  t.model = "scripted-model";
  t.timeout_s = 5;
  t.extra_body = {{"scenario", scenario}};
  return t;
}

std::vector<std::vector<int32_t>> prompts(size_t n, size_t len) {
  return std::vector<std::vector<int32_t>>(n, std::vector<int32_t>(len, 1234));
}

LevelLoad closed(int64_t concurrency, size_t n) { return {concurrency, std::vector<double>(n, 0.0)}; }

TEST(Endpoints, BaseUrlForms) {
  for (const char* u : {"http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/", "http://h:1/v1/completions"}) {
    Endpoints e = endpoint_urls(u);
    EXPECT_EQ(e.completions, "http://h:1/v1/completions") << u;
    EXPECT_EQ(e.models, "http://h:1/v1/models") << u;
  }
  EXPECT_EQ(endpoint_urls("https://x/api").completions, "https://x/api/v1/completions");
  for (const char* bad : {"", "h:1", "ftp://h/", "localhost:8080"}) EXPECT_THROW(endpoint_urls(bad), Error) << bad;
}

TEST(Client, BodyAsksForExactlyOutputLenTokens) {
  ServerTarget t;
  t.model = "m";
  t.extra_body = {{"top_k", 1}, {"temperature", 0.5}};
  json b = json::parse(completion_body(t, {3, 4, 5}, 16));
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["prompt"], json::array({3, 4, 5}));
  EXPECT_EQ(b["max_tokens"], 16);
  EXPECT_EQ(b["min_tokens"], 16);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["top_k"], 1);
  EXPECT_EQ(b["temperature"], 0.5);  // the user's fields win
}

TEST(Client, CompletedStreams) {
  ScriptedServer s;
  s.hold_until_in_flight(3);
  LevelRun run = run_level(target(s, "ok"), prompts(6, 5), 4, closed(3, 6));
  ASSERT_EQ(run.results.size(), 6u);
  for (const RequestResult& r : run.results) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.prompt_len, 5);
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.usage_prompt_tokens, 5);
    EXPECT_EQ(r.chunks, 4);
    EXPECT_EQ(r.itl_s.size(), 3u);
    EXPECT_GT(r.ttft_s, 0);
    EXPECT_LE(r.ttft_s, r.latency_s);
    EXPECT_LE(r.start_s + r.latency_s, run.duration_s + 1e-9);
  }
  EXPECT_EQ(s.max_in_flight(), 3);  // the concurrency cap held, and was used
  auto bodies = s.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  EXPECT_EQ(bodies[0]["prompt"], json::array({1234, 1234, 1234, 1234, 1234}));
  EXPECT_EQ(bodies[0]["model"], "scripted-model");
}

TEST(Client, WithoutUsageChunksAreCounted) {
  ScriptedServer s;
  LevelRun run = run_level(target(s, "no_usage"), prompts(2, 3), 5, closed(2, 2));
  for (const RequestResult& r : run.results) {
    EXPECT_TRUE(r.ok()) << r.error;
    EXPECT_FALSE(r.usage_reported);
    EXPECT_EQ(r.output_tokens, 5);
  }
  run = run_level(target(s, "short"), prompts(1, 3), 5, closed(1, 1));
  EXPECT_TRUE(run.results[0].ok());
  EXPECT_EQ(run.results[0].output_tokens, 4);
}

TEST(Client, FailuresAreClassified) {
  ScriptedServer s;
  struct Case {
    const char* scenario;
    Failure want;
    const char* message_part;
  };
  for (const Case& c : {Case{"http500", Failure::Http, "HTTP 500: boom"}, Case{"reset", Failure::Connection, ""},
                        Case{"malformed", Failure::Stream, "malformed stream event"},
                        Case{"unfinished", Failure::Stream, "ended before"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    LevelRun run = run_level(target(s, c.scenario), prompts(2, 3), 6, closed(2, 2));
    for (const RequestResult& r : run.results) {
      EXPECT_EQ(r.failure, c.want) << c.scenario << ": " << r.error;
      EXPECT_NE(r.error.find(c.message_part), std::string::npos) << c.scenario << ": " << r.error;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << c.scenario;
    if (c.want == Failure::Http) {
      EXPECT_EQ(run.results[0].http_status, 500);
    }
  }
}

TEST(Client, TimeoutsAreCountedApart) {
  ScriptedServer s;
  ServerTarget t = target(s, "slow");
  t.timeout_s = 0.2;
  LevelRun run = run_level(t, prompts(2, 3), 4, closed(2, 2));
  for (const RequestResult& r : run.results) EXPECT_EQ(r.failure, Failure::Timeout) << r.error;
  EXPECT_LT(run.duration_s, 2.0);  // gave up at the timeout, long before the server's 3 s (slack for a loaded machine)
}

TEST(Client, NobodyListening) {
  ServerTarget t;
  {
    ScriptedServer s;  // a port that was just free
    t = target(s, "ok");
  }
  LevelRun run = run_level(t, prompts(3, 3), 4, closed(1, 3));
  for (const RequestResult& r : run.results) EXPECT_EQ(r.failure, Failure::Connection) << r.error;
  EXPECT_THROW(discover_model(t), Error);
}

TEST(Client, ArrivalsAreKept) {
  ScriptedServer s;
  LevelLoad load{0, {0.0, 0.6, 1.2}};
  LevelRun run = run_level(target(s, "ok"), prompts(3, 3), 2, load);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(run.results[i].ok()) << run.results[i].error;
    EXPECT_GE(run.results[i].start_s, load.arrivals[i]);
    EXPECT_LT(run.results[i].start_s, load.arrivals[i] + 0.4);  // before the next arrival, even on a loaded machine
  }
  EXPECT_GE(run.duration_s, 1.2);
}

TEST(Client, DiscoversTheModel) {
  ScriptedServer s;
  EXPECT_EQ(discover_model(target(s, "ok")), "scripted-model");
}

}  // namespace
}  // namespace ingot::loadgen
