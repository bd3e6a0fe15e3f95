// HTTP request bodies: every route's JSON parsing and validation, through the
// Router exactly as the socket layer calls it, over a fake engine (no model).
// Input: first byte picks the route (low bits) and a header variant (high bits), the rest is the
// body. Any 5xx answer, an escaped exception or a malformed error body is a
// finding; streamed bodies are drained too.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http_app.h"
#include "server/service.h"
#include "server/tests/fakes.h"
#include "template/chat_template.h"

namespace {

using namespace ingot::server;

// ChatML with tools and a generation prompt: enough template to exercise
// message rendering (string and part content, tool calls, tool results).
const char* kTemplate =
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.content is string %}{{ m.content }}{% elif m.content %}{% for p in m.content %}"
    "{{ p.text if p.text is defined }}{% endfor %}{% endif %}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const char* kRoutes[][2] = {
    {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"POST", "/v1/embeddings"},
    {"POST", "/v1/responses"},        {"POST", "/v1/messages"},    {"POST", "/v1/messages/count_tokens"},
    {"POST", "/tokenize"},            {"POST", "/detokenize"},     {"GET", "/v1/models"},
    {"GET", "/v1/models/test-model"}, {"GET", "/metrics"},         {"GET", "/health"},
};

struct World {
  testing::FakeEngine engine;
  testing::ByteTokenizer tok;
  std::unique_ptr<Service> svc;
  std::unique_ptr<Router> router;
  World() {
    ServeOptions o;
    o.model_id = "test-model";
    o.context_length = 512;
    o.api_key = "k";
    o.response_store_size = 8;
    o.tool_format = ToolFormat::Hermes;
    svc = std::make_unique<Service>(engine, tok, ingot::ChatTemplate::compile(kTemplate), o);
    router = std::make_unique<Router>(*svc);
  }
};

class DrainSink : public StreamSink {
 public:
  bool write(std::string_view d) override {
    bytes += d.size();
    return bytes < (1u << 20);
  }
  size_t bytes = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  if (size == 0) return 0;
  const size_t n_routes = sizeof(kRoutes) / sizeof(kRoutes[0]);
  HttpRequest req;
  // Low 6 bits: the route (fuzz/make_seeds.py writes index | 0x80 for an authorized seed).
  const size_t route = (data[0] & 0x3f) % n_routes;
  req.method = kRoutes[route][0];
  req.path = kRoutes[route][1];
  req.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  // High bit: authorized; otherwise the key is wrong half the time.
  if (data[0] & 0x80) req.headers["authorization"] = "Bearer k";
  else if (data[0] & 0x40) req.headers["x-api-key"] = "nope";
  req.headers["content-type"] = "application/json";
  HttpResponse res = w.router->dispatch(req);
  if (res.status >= 500 || res.status < 200) __builtin_trap();
  if (res.stream) {
    DrainSink sink;
    res.stream(sink);
  } else if (res.content_type.rfind("application/json", 0) == 0) {
    // Every JSON answer parses (error bodies included).
    if (!nlohmann::json::accept(res.body)) __builtin_trap();
  }
  return 0;
}
