#include "server/http_app.h"

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/routes.h"
#include "server/service.h"
#include "server/web/web_page.h"
#include "util/log.h"

namespace ingot::server {

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Compares every byte of the longer string so timing leaks neither content nor length prefix.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string cors_allow_origin(const std::string& allowed, const std::string& origin) {
  if (allowed.empty()) return "";
  if (allowed == "*") return "*";
  if (origin.empty()) return "";
  size_t start = 0;
  while (start <= allowed.size()) {
    size_t end = allowed.find(',', start);
    if (end == std::string::npos) end = allowed.size();
    std::string one = allowed.substr(start, end - start);
    while (!one.empty() && one.front() == ' ') one.erase(0, 1);
    while (!one.empty() && one.back() == ' ') one.pop_back();
    if (one == origin) return origin;
    start = end + 1;
  }
  return "";
}

Router::Router(Service& svc) : svc_(svc) {
  auto bind = [this](HttpResponse (*fn)(Service&, const HttpRequest&)) {
    return [this, fn](const HttpRequest& r) { return fn(svc_, r); };
  };
  add("GET", "/health", bind(health), false, false);
  // The chat page is static; the API calls it makes carry their own auth.
  add("GET", "/", [](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(chat_page_html());
    return r;
  }, false, false);
  add("GET", "/metrics", bind(metrics));
  add("GET", "/v1/models", bind(list_models));
  add("GET", "/v1/models/", bind(list_models), true);
  add("POST", "/v1/chat/completions", bind(chat_completions));
  add("POST", "/v1/completions", bind(completions));
  add("POST", "/v1/embeddings", bind(embeddings));
  add("POST", "/v1/responses", bind(responses));
  add("POST", "/v1/messages", bind(anthropic_messages));
  add("POST", "/v1/messages/count_tokens", bind(anthropic_count_tokens));
  add("POST", "/tokenize", bind(tokenize));
  add("POST", "/detokenize", bind(detokenize));
  // Unversioned aliases that llama.cpp and mlx_lm clients use.
  add("POST", "/chat/completions", bind(chat_completions));
  add("POST", "/completions", bind(completions));
  add("GET", "/models", bind(list_models));
  add("POST", "/v1/audio/transcriptions", bind(audio_transcriptions));
  add("POST", "/v1/audio/translations", bind(audio_translations));
  add("POST", "/v1/load_lora_adapter", bind(load_lora_adapter));
  add("POST", "/v1/unload_lora_adapter", bind(unload_lora_adapter));
}

void Router::add(std::string method, std::string path, Handler h, bool prefix, bool auth) {
  routes_.push_back({std::move(method), std::move(path), prefix, auth, std::move(h)});
}

bool Router::authorized(const HttpRequest& req) const {
  const std::string& key = svc_.options().api_key;
  if (key.empty()) return true;
  std::string auth = req.header("authorization");
  const std::string bearer = "Bearer ";
  bool ok = false;
  if (auth.size() > bearer.size() && auth.compare(0, bearer.size(), bearer) == 0)
    ok |= constant_time_equal(auth.substr(bearer.size()), key);
  std::string x = req.header("x-api-key");
  if (!x.empty()) ok |= constant_time_equal(x, key);
  return ok;
}

HttpResponse Router::error_response(const std::string& path, int status, const std::string& message,
                                    const std::string& param, const std::string& code) const {
  bool anthropic = path.rfind("/v1/messages", 0) == 0;
  HttpResponse r = json_response(anthropic ? anthropic_error_body(status, message)
                                           : openai_error_body(status, message, param, code),
                                 status);
  if (status == 429 || status == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

HttpResponse Router::dispatch(const HttpRequest& req) {
  const Route* found = nullptr;
  bool path_known = false;
  for (const Route& r : routes_) {
    bool match = r.prefix ? (req.path.size() > r.path.size() && req.path.compare(0, r.path.size(), r.path) == 0)
                          : req.path == r.path;
    if (!match) continue;
    path_known = true;
    if (r.method == req.method) {
      found = &r;
      break;
    }
  }
  HttpResponse res;
  std::string route = found ? found->path : "unmatched";
  if (!found) {
    res = path_known ? error_response(req.path, 405, "method " + req.method + " is not allowed on " + req.path)
                     : error_response(req.path, 404, "no route for " + req.method + " " + req.path);
  } else if (found->needs_auth && !authorized(req)) {
    res = error_response(req.path, 401, "invalid or missing API key", "", "invalid_api_key");
  } else {
    try {
      if (!svc_.options().text_model && needs_text_model(found->method, found->path))
        throw ApiError(400, "model '" + svc_.options().model_id + "' is a speech-to-text model and does not support chat "
                       "or text generation; use /v1/audio/transcriptions", "model", "model_not_supported");
      res = found->handler(req);
    } catch (const std::exception& e) {
      ErrorInfo info = classify_exception(e);
      if (info.status >= 500) log::error("request ", req.method, " ", req.path, " failed: ", info.message);
      res = error_response(req.path, info.status, info.message, info.param, info.code);
    }
  }
  svc_.metrics().count_request(route, res.status);
  return res;
}

}  // namespace ingot::server
