// Security properties of the HTTP surface: API key on every route but
// /health (and the static page), constant-time comparison, CORS off unless
// an origin is given, header limits, and no path-like field reaching the
// file system.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "server/http_app.h"
#include "server/service.h"
#include "server/tests/fakes.h"
#include "server/tests/loopback.h"

namespace ingot::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// Every route the Router registers, with a body it accepts.
struct RouteCase {
  std::string method, path, body;
};
const std::vector<RouteCase>& all_routes() {
  static const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2})";
  static const std::vector<RouteCase> r = {
      {"GET", "/metrics", ""},
      {"GET", "/v1/models", ""},
      {"GET", "/v1/models/m", ""},
      {"GET", "/models", ""},
      {"POST", "/v1/chat/completions", chat},
      {"POST", "/chat/completions", chat},
      {"POST", "/v1/completions", R"({"prompt":"Hi","max_tokens":2})"},
      {"POST", "/completions", R"({"prompt":"Hi","max_tokens":2})"},
      {"POST", "/v1/embeddings", R"({"input":"Hi"})"},
      {"POST", "/v1/responses", R"({"input":"Hi","max_output_tokens":2})"},
      {"POST", "/v1/messages", R"({"max_tokens":2,"messages":[{"role":"user","content":"Hi"}]})"},
      {"POST", "/v1/messages/count_tokens", R"({"messages":[{"role":"user","content":"Hi"}]})"},
      {"POST", "/tokenize", R"({"content":"Hi"})"},
      {"POST", "/detokenize", R"({"tokens":[72]})"},
  };
  return r;
}

class SecurityTest : public ::testing::Test {
 protected:
  void start(ServeOptions o) {
    o.model_id = "m";
    o.port = 0;
    o.context_length = 512;
    o.http_threads = 8;
    svc = std::make_unique<Service>(engine, tok, std::make_shared<testing::LineTemplate>(), o);
    router = std::make_unique<Router>(*svc);
  }
  void listen() {
    server = std::thread([this] { serve_http(*router, *svc, [this](int p) { port = p; }, stop); });
    for (int i = 0; i < 2000 && port.load() == 0; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_NE(port.load(), 0);
  }
  void TearDown() override {
    stop = true;
    if (server.joinable()) server.join();
  }
  HttpResponse call(const RouteCase& rc, std::map<std::string, std::string> headers = {}) {
    HttpRequest r;
    r.method = rc.method;
    r.path = rc.path;
    r.body = rc.body;
    r.headers = std::move(headers);
    return router->dispatch(r);
  }
  std::string exchange(const std::string& raw) { return testing::exchange(port.load(), raw); }
  static std::string get(const std::string& path, const std::string& extra = "") {
    return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "\r\n";
  }

  testing::FakeEngine engine;
  testing::ByteTokenizer tok;
  std::unique_ptr<Service> svc;
  std::unique_ptr<Router> router;
  std::atomic<bool> stop{false};
  std::atomic<int> port{0};
  std::thread server;
};

TEST(ServeDefaults, BindLoopbackWithNoCorsAndNoKey) {
  ServeOptions o;
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_TRUE(o.cors_origin.empty());
  EXPECT_TRUE(o.api_key.empty());
}

TEST(ConstantTimeEqual, ComparesWholeStrings) {
  EXPECT_TRUE(constant_time_equal("sekrit", "sekrit"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("sekrit", "sekriT"));
  EXPECT_FALSE(constant_time_equal("sekrit", "sekri"));
  EXPECT_FALSE(constant_time_equal("sekri", "sekrit"));
  EXPECT_FALSE(constant_time_equal("sekrit", std::string("sekrit\0", 7)));
  EXPECT_FALSE(constant_time_equal("", "x"));
}

TEST_F(SecurityTest, ApiKeyGuardsEveryRouteButHealthAndThePage) {
  ServeOptions o;
  o.api_key = "sekrit";
  start(o);
  const std::vector<std::map<std::string, std::string>> wrong = {
      {},
      {{"authorization", "Bearer wrong!"}},
      {{"authorization", "Bearer sekri"}},
      {{"authorization", "Bearer sekrit2"}},
      {{"authorization", "Bearer "}},
      {{"authorization", "sekrit"}},  // no scheme
      {{"authorization", "Basic sekrit"}},
      {{"x-api-key", "SEKRIT"}},
      {{"x-api-key", ""}},
  };
  for (const auto& rc : all_routes()) {
    const int64_t before = engine.st->submitted.load();
    for (const auto& h : wrong) {
      HttpResponse r = call(rc, h);
      EXPECT_EQ(r.status, 401) << rc.method << " " << rc.path;
    }
    EXPECT_EQ(engine.st->submitted.load(), before) << "nothing reaches the engine without the key: " << rc.path;
    EXPECT_NE(call(rc, {{"authorization", "Bearer sekrit"}}).status, 401) << rc.path;
    EXPECT_NE(call(rc, {{"x-api-key", "sekrit"}}).status, 401) << rc.path;
  }
  EXPECT_EQ(call({"GET", "/health", ""}).status, 200);
  EXPECT_EQ(call({"GET", "/", ""}).status, 200) << "the static chat page carries no data";
}

TEST_F(SecurityTest, NoPathLikeFieldReachesTheFileSystem) {
  ServeOptions strict;
  strict.strict_model_name = true;  // by default any name means the served model: it is never opened either way
  start(strict);
  for (std::string name : {"../../../../etc/passwd", "/etc/passwd", "..", "m/../../etc", "./m"}) {
    HttpResponse r = call({"POST", "/v1/chat/completions",
                           json{{"model", name}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}.dump()});
    EXPECT_EQ(r.status, 404) << name;
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found") << name;
    EXPECT_EQ(call({"GET", "/v1/models/" + name, ""}).status, 404) << name;
    EXPECT_EQ(call({"POST", "/v1/responses", json{{"input", "x"}, {"previous_response_id", name}}.dump()}).status, 404)
        << name;
  }
  EXPECT_EQ(engine.st->submitted.load(), 0);
}

TEST(Cors, AllowOriginRules) {
  EXPECT_EQ(cors_allow_origin("", "http://a.test"), "");
  EXPECT_EQ(cors_allow_origin("*", ""), "*");
  EXPECT_EQ(cors_allow_origin("*", "http://a.test"), "*");
  EXPECT_EQ(cors_allow_origin("http://a.test", "http://a.test"), "http://a.test");
  EXPECT_EQ(cors_allow_origin("http://a.test", "http://a.test.evil"), "");
  EXPECT_EQ(cors_allow_origin("http://a.test", "http://evil"), "");
  EXPECT_EQ(cors_allow_origin("http://a.test", ""), "");
  EXPECT_EQ(cors_allow_origin("http://a.test, http://b.test", "http://b.test"), "http://b.test");
  EXPECT_EQ(cors_allow_origin("http://a.test,http://b.test", "http://c.test"), "");
}

TEST_F(SecurityTest, CorsIsOffByDefault) {
  start({});
  listen();
  std::string r = exchange(get("/v1/models", "Origin: http://a.test\r\n"));
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  EXPECT_EQ(r.find("Access-Control-Allow-Origin"), std::string::npos) << r;
  std::string pre = exchange("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                             "Origin: http://a.test\r\nAccess-Control-Request-Method: POST\r\n\r\n");
  EXPECT_NE(pre.find("HTTP/1.1 405"), std::string::npos) << pre;
  EXPECT_EQ(pre.find("Access-Control-Allow-Origin"), std::string::npos) << pre;
}

TEST_F(SecurityTest, CorsForOneOriginOnly) {
  ServeOptions o;
  o.cors_origin = "http://a.test";
  o.api_key = "k";
  start(o);
  listen();
  const std::string pre_req = "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              "Access-Control-Request-Method: POST\r\nOrigin: ";
  std::string pre = exchange(pre_req + "http://a.test\r\n\r\n");
  EXPECT_NE(pre.find("HTTP/1.1 204"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Origin: http://a.test\r\n"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Headers: Authorization"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Vary: Origin"), std::string::npos) << pre;
  std::string evil = exchange(pre_req + "http://evil.test\r\n\r\n");
  EXPECT_NE(evil.find("HTTP/1.1 403"), std::string::npos) << evil;
  EXPECT_EQ(evil.find("Access-Control-Allow-Origin"), std::string::npos) << evil;
  std::string ok = exchange(get("/v1/models", "Authorization: Bearer k\r\nOrigin: http://a.test\r\n"));
  EXPECT_NE(ok.find("Access-Control-Allow-Origin: http://a.test\r\n"), std::string::npos) << ok;
  std::string other = exchange(get("/v1/models", "Authorization: Bearer k\r\nOrigin: http://evil.test\r\n"));
  EXPECT_NE(other.find("HTTP/1.1 200"), std::string::npos) << other;
  EXPECT_EQ(other.find("Access-Control-Allow-Origin"), std::string::npos) << other;
}

TEST_F(SecurityTest, CorsStarAllowsAnyOrigin) {
  ServeOptions o;
  o.cors_origin = "*";
  start(o);
  listen();
  std::string pre = exchange("OPTIONS /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                             "Origin: http://x.test\r\nAccess-Control-Request-Method: POST\r\n\r\n");
  EXPECT_NE(pre.find("HTTP/1.1 204"), std::string::npos) << pre;
  EXPECT_NE(pre.find("Access-Control-Allow-Origin: *\r\n"), std::string::npos) << pre;
  std::string r = exchange(get("/health"));
  EXPECT_NE(r.find("Access-Control-Allow-Origin: *\r\n"), std::string::npos) << r;
}

TEST_F(SecurityTest, HeaderAndUriLimits) {
  start({});
  listen();
  std::string many;
  for (size_t i = 0; i < kMaxHeaderCount + 10; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  std::string r = exchange(get("/v1/models", many));
  EXPECT_NE(r.find("HTTP/1.1 431"), std::string::npos) << r.substr(0, 200);
  std::string big;
  for (int i = 0; i < 8; ++i) big += "X-Big" + std::to_string(i) + ": " + std::string(6000, 'a') + "\r\n";
  r = exchange(get("/v1/models", big));
  EXPECT_NE(r.find("HTTP/1.1 431"), std::string::npos) << r.substr(0, 200);
  // One header line past 8 KiB, and overlong URIs (path, query).
  r = exchange(get("/v1/models", "X-Huge: " + std::string(20000, 'a') + "\r\n"));
  EXPECT_NE(r.find("HTTP/1.1 431"), std::string::npos) << r.substr(0, 200);
  r = exchange(get("/v1/models?" + std::string(20000, 'q')));
  EXPECT_NE(r.find("HTTP/1.1 414"), std::string::npos) << r.substr(0, 200);
  r = exchange(get("/v1/models/" + std::string(9000, 'p')));
  EXPECT_NE(r.find("HTTP/1.1 414"), std::string::npos) << r.substr(0, 200);
  EXPECT_NE(r.find("\"error\""), std::string::npos) << r.substr(0, 200);
  // Past what the library buffers for a head at all: refused, never served.
  r = exchange(get("/v1/models", "X-Huge: " + std::string(200000, 'a') + "\r\n"));
  EXPECT_EQ(r.find("HTTP/1.1 200"), std::string::npos) << r.substr(0, 200);
  // Within the limits all is well.
  std::string fine;
  for (int i = 0; i < 20; ++i) fine += "X-F" + std::to_string(i) + ": " + std::string(500, 'b') + "\r\n";
  r = exchange(get("/v1/models", fine));
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r.substr(0, 200);
}

}  // namespace
}  // namespace ingot::server
