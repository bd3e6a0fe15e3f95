// The HTTP layer on a real socket (with the fake engine): limits, malformed
// and truncated requests, slow senders, and cancellation on disconnect.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "server/http_app.h"
#include "server/service.h"
#include "server/tests/fakes.h"
#include "server/tests/loopback.h"

namespace ingot::server {
namespace {

using namespace std::chrono_literals;

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServeOptions o;
    o.model_id = "m";
    o.port = 0;
    o.context_length = 512;
    o.max_body_bytes = 4096;
    o.http_threads = 8;
    configure(o);
    svc = std::make_unique<Service>(engine, tok, std::make_shared<testing::LineTemplate>(), o);
    router = std::make_unique<Router>(*svc);
    server = std::thread([this] {
      serve_http(*router, *svc, [this](int p) { port = p; }, stop);
    });
    for (int i = 0; i < 2000 && port.load() == 0; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_NE(port.load(), 0);
  }
  virtual void configure(ServeOptions&) {}
  void TearDown() override {
    stop = true;
    server.join();
  }
  int connect_socket() { return testing::connect_loopback(port.load()); }
  static void send_all(int fd, const std::string& s) { testing::send_all(fd, s); }
  std::string exchange(const std::string& raw, const std::string& until = "") {
    return testing::exchange(port.load(), raw, until);
  }
  static std::string post(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  bool healthy() {
    std::string r = exchange("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return r.find("200") != std::string::npos && r.find("{\"status\":\"ok\"}") != std::string::npos;
  }

  testing::FakeEngine engine;
  testing::ByteTokenizer tok;
  std::unique_ptr<Service> svc;
  std::unique_ptr<Router> router;
  std::atomic<bool> stop{false};
  std::atomic<int> port{0};
  std::thread server;
  const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}]})";
};

TEST_F(HttpTest, ServesAndAnswersErrorsAsJson) {
  EXPECT_TRUE(healthy());
  std::string ok = exchange(post("/v1/chat/completions", chat));
  EXPECT_NE(ok.find("HTTP/1.1 200"), std::string::npos);
  EXPECT_NE(ok.find("Hello world"), std::string::npos);
  std::string bad = exchange(post("/v1/chat/completions", "{\"messages\": ["));
  EXPECT_NE(bad.find("HTTP/1.1 400"), std::string::npos);
  EXPECT_NE(bad.find("\"error\""), std::string::npos);
  std::string big = exchange(post("/v1/chat/completions", std::string(10000, 'x')));
  EXPECT_NE(big.find("HTTP/1.1 413"), std::string::npos) << big;
  EXPECT_NE(big.find("\"error\""), std::string::npos) << big;
  std::string cors = exchange("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(cors.find("Access-Control-Allow-Origin"), std::string::npos);
}

TEST_F(HttpTest, SurvivesGarbageTruncationAndSlowSenders) {
  // A malformed head gets a 400; a first line that is not a request line at all
  // (no spaces) is closed without an answer by libmicrohttpd 0.9.75.
  EXPECT_NE(exchange("GET / HTTP/1.1\r\nBad Header\r\n\r\n", "\r\n\r\n").find("HTTP/1.1 400"), std::string::npos);
  EXPECT_EQ(exchange("\x01\x02garbage\r\n\r\n"), "");
  {
    int fd = connect_socket();  // truncated headers, then close
    send_all(fd, "GET /health HTTP/1.1\r\nHost");
    ::close(fd);
  }
  {
    int fd = connect_socket();  // truncated body: promises 1000 bytes, sends 10, hangs up
    send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"messages\"");
    ::close(fd);
  }
  // Slow partial sender: a byte at a time; a good request on another connection still works.
  int slow = connect_socket();
  std::string req = post("/v1/chat/completions", chat);
  for (size_t i = 0; i < 20; ++i) {
    send_all(slow, req.substr(i, 1));
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(healthy());
  send_all(slow, req.substr(20));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(slow, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(slow);
  EXPECT_NE(got.find("Hello world"), std::string::npos);
  // Random bytes as bodies.
  std::mt19937 rng(1);
  for (int i = 0; i < 20; ++i) {
    std::string body(static_cast<size_t>(rng() % 300), '\0');
    for (char& c : body) c = static_cast<char>(rng());
    std::string r = exchange(post("/v1/chat/completions", body));
    EXPECT_NE(r.find("HTTP/1.1 4"), std::string::npos) << i;
  }
  EXPECT_TRUE(healthy());
}

TEST_F(HttpTest, DisconnectCancelsStreamAndNonStream) {
  engine.st->token_delay = 2ms;
  engine.st->reply = [](const engine::Request&) { return std::string(100000, 'a'); };
  for (bool stream : {true, false}) {
    int64_t before = engine.st->cancelled.load();
    std::string body = stream ? R"({"stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"Hi"}]})"
                              : R"({"max_tokens":100000,"messages":[{"role":"user","content":"Hi"}]})";
    int fd = connect_socket();
    send_all(fd, post("/v1/chat/completions", body));
    if (stream) {
      char buf[512];
      ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0);
    } else {
      std::this_thread::sleep_for(100ms);
    }
    ::close(fd);
    auto t0 = std::chrono::steady_clock::now();
    while (engine.st->cancelled.load() == before && std::chrono::steady_clock::now() - t0 < 3s)
      std::this_thread::sleep_for(5ms);
    EXPECT_EQ(engine.st->cancelled.load(), before + 1) << (stream ? "stream" : "non-stream");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  }
  EXPECT_EQ(engine.st->active.load(), 0);
  EXPECT_TRUE(healthy());
}

TEST_F(HttpTest, APortInUseIsReportedNotServed) {
  ServeOptions o;
  o.port = port.load();
  Service other(engine, tok, std::make_shared<testing::LineTemplate>(), o);
  Router other_router(other);
  std::atomic<bool> never{false};
  bool ready = false;
  EXPECT_FALSE(serve_http(other_router, other, [&](int) { ready = true; }, never));
  EXPECT_FALSE(ready);
  EXPECT_TRUE(healthy());
}

// Multipart bodies reach the route as raw bytes, for ingot's parser
// (server/multipart.h) to answer. This server has no audio model: a
// well-formed form reaches that check, a malformed one is refused by the
// parser first.
TEST_F(HttpTest, MultipartBodiesReachTheRouteRaw) {
  auto form = [](const std::string& type, const std::string& body) {
    return "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: " + type +
           "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const std::string type = "multipart/form-data; boundary=b0";
  const std::string good = "--b0\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
                           "--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                           "Content-Type: audio/wav\r\n\r\nRIFF....\r\n--b0--\r\n";
  std::string r = exchange(form(type, good));
  EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << r;
  EXPECT_NE(r.find("does not support audio transcription"), std::string::npos) << r;
  r = exchange(form(type, good.substr(0, good.size() - 10)));  // truncated: no closing boundary
  EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << r;
  EXPECT_NE(r.find("malformed multipart body: part 2 ('file') is not followed by a boundary line"), std::string::npos)
      << r;
  r = exchange(form("multipart/form-data", good));  // no boundary parameter
  EXPECT_NE(r.find("no boundary parameter"), std::string::npos) << r;
  r = exchange(form("Multipart/Form-Data; boundary=b0", "--b0\r\nbroken\r\n\r\n"));
  EXPECT_NE(r.find("without a name and ':'"), std::string::npos) << r;
  EXPECT_TRUE(healthy());
}

// Connection caps and deadlines, set small so each case takes about a second.
class SlowClientTest : public HttpTest {
 protected:
  void configure(ServeOptions& o) override {
    o.max_connections = 300;
    o.max_connections_per_client = 250;
    o.header_timeout_s = 1;
    o.keep_alive_timeout_s = 1;
    o.io_timeout_s = 1;
    o.context_length = 1 << 20;  // room for a stream far larger than every buffer on its way
    o.body_budget_bytes = 6000;
  }
  // Reads until the server closes; false when it is still open after `limit`.
  static bool closed_within(int fd, std::chrono::milliseconds limit, std::string* got = nullptr) {
    timeval tv{0, 100000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto t0 = std::chrono::steady_clock::now();
    char buf[4096];
    while (std::chrono::steady_clock::now() - t0 < limit) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
      if (n > 0 && got) got->append(buf, static_cast<size_t>(n));
    }
    return false;
  }
};

TEST_F(SlowClientTest, HalfOpenConnectionsLeaveOthersAnswering) {
  std::vector<int> held;
  for (int i = 0; i < 240; ++i) {
    held.push_back(connect_socket());
    send_all(held.back(), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-");
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(healthy());
  std::string ok = exchange(post("/v1/chat/completions", chat));
  EXPECT_NE(ok.find("Hello world"), std::string::npos) << ok;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  // The head deadline then closes every one of them, each with a 408.
  std::string got;
  EXPECT_TRUE(closed_within(held.front(), 3s, &got));
  EXPECT_NE(got.find("HTTP/1.1 408"), std::string::npos) << got;
  for (int fd : held) {
    EXPECT_TRUE(closed_within(fd, 1s));
    ::close(fd);
  }
}

TEST_F(SlowClientTest, PastTheClientCapNewConnectionsGet503) {
  std::vector<int> held;
  for (int i = 0; i < 250; ++i) held.push_back(connect_socket());
  std::string r = exchange("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 503"), std::string::npos) << r;
  EXPECT_NE(r.find("too_many_connections"), std::string::npos) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos) << r;
  for (int fd : held) ::close(fd);
  bool ok = false;
  for (int i = 0; i < 100 && !ok; ++i) {
    std::this_thread::sleep_for(10ms);
    ok = healthy();
  }
  EXPECT_TRUE(ok);  // the slots come back once the connections close
}

TEST_F(SlowClientTest, IdleAndTricklingConnectionsAreClosed) {
  int idle = connect_socket();  // never sends a byte
  int kept = connect_socket();  // one request, then idle on keep-alive
  send_all(kept, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got;
  EXPECT_TRUE(closed_within(kept, 3s, &got));
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  EXPECT_TRUE(closed_within(idle, 1s));
  ::close(idle);
  ::close(kept);
  // A head trickling in, one byte per 200 ms, each keeping it "active", is cut at the head deadline.
  int slow = connect_socket();
  std::string head = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100, 'a');
  auto t0 = std::chrono::steady_clock::now();
  bool cut = false;
  for (char c : head) {
    if (::send(slow, &c, 1, MSG_NOSIGNAL) != 1) {
      cut = true;
      break;
    }
    got.clear();
    if (closed_within(slow, 200ms, &got)) {
      cut = true;
      break;
    }
  }
  EXPECT_TRUE(cut);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 2500ms);
  ::close(slow);
  EXPECT_TRUE(healthy());
}

TEST_F(SlowClientTest, AStalledStreamReaderIsCancelled) {
  engine.st->token_delay = 1ms;
  engine.st->reply = [](const engine::Request&) { return std::string(1000000, 'a'); };
  int64_t before = engine.st->cancelled.load();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));  // before connect: a small window
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port.load()));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  send_all(fd, post("/v1/chat/completions",
                    R"({"stream":true,"max_tokens":1000000,"messages":[{"role":"user","content":"Hi"}]})"));
  char buf[256];
  ASSERT_GT(::recv(fd, buf, sizeof(buf), 0), 0);
  // Stop reading: buffers fill, the write stalls past --io-timeout, the generation is cancelled.
  auto t0 = std::chrono::steady_clock::now();
  while (engine.st->cancelled.load() == before && std::chrono::steady_clock::now() - t0 < 10s)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(engine.st->cancelled.load(), before + 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(engine.st->active.load(), 0);
  EXPECT_TRUE(healthy());
  ::close(fd);
}

TEST_F(SlowClientTest, BodiesHeldAtOnceHaveABudget) {
  int slow = connect_socket();  // promises 4000 bytes, sends 10 and waits: its 4000 are held
  send_all(slow, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n{\"messages\"");
  std::this_thread::sleep_for(50ms);
  std::string body = R"({"messages":[{"role":"user","content":")" + std::string(3000, 'a') + "\"}]}";
  std::string r = exchange(post("/v1/chat/completions", body));
  EXPECT_NE(r.find("HTTP/1.1 503"), std::string::npos) << r;
  EXPECT_NE(r.find("too many request bodies"), std::string::npos) << r;
  EXPECT_NE(exchange(post("/v1/chat/completions", chat)).find("Hello world"), std::string::npos);  // small fits
  ::close(slow);
  std::this_thread::sleep_for(50ms);
  r = exchange(post("/v1/chat/completions", body));
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
}

}  // namespace
}  // namespace ingot::server
