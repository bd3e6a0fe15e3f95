#include "loadgen/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::loadgen {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr size_t kMaxErrorBody = 4096;
constexpr long kMaxConnectMs = 10000;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

long timeout_ms(double seconds) { return static_cast<long>(std::clamp(seconds * 1000.0, 1.0, 1e9)); }

using EasyPtr = std::unique_ptr<CURL, void (*)(CURL*)>;
using HeaderList = std::unique_ptr<curl_slist, void (*)(curl_slist*)>;

HeaderList request_headers(const ServerTarget& target, bool json_body) {
  curl_slist* h = nullptr;
  if (json_body) {
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    h = curl_slist_append(h, "Expect:");  // no 100-continue round trip before a large body
  }
  if (!target.api_key.empty()) h = curl_slist_append(h, ("Authorization: Bearer " + target.api_key).c_str());
  return HeaderList(h, curl_slist_free_all);
}

// The options every request shares.
void common_options(CURL* h, const std::string& url, const curl_slist* headers, double timeout_s, char* errbuf) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms(timeout_s));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms(timeout_s), kMaxConnectMs));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ingot-bench");
}

long response_code(CURL* h) {
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

std::string curl_message(CURLcode code, const char* errbuf) {
  return errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(code));
}

// One request in flight; it leaves the multi handle when it is destroyed
// (curl wants an easy handle removed before it is cleaned up).
struct Transfer {
  Transfer(size_t i, std::string b, Clock::time_point t0, double start)
      : index(i), body(std::move(b)), level_start(t0), stream(start) {}
  ~Transfer() {
    if (multi && easy) curl_multi_remove_handle(multi, easy.get());
  }
  double now() const { return std::chrono::duration<double>(Clock::now() - level_start).count(); }

  size_t index;
  std::string body;
  Clock::time_point level_start;
  CompletionStream stream;
  EasyPtr easy{nullptr, curl_easy_cleanup};
  CURLM* multi = nullptr;  // set once added to it
  std::string error_body;
  char errbuf[CURL_ERROR_SIZE] = {0};
};

size_t on_write(char* data, size_t size, size_t n, void* self) {
  auto* t = static_cast<Transfer*>(self);
  const size_t bytes = size * n;
  const long status = response_code(t->easy.get());
  if (status >= 200 && status < 300) {
    t->stream.on_bytes(std::string_view(data, bytes), t->now());
    if (t->stream.failed()) return 0;  // a broken stream ends the transfer at once
  } else if (t->error_body.size() < kMaxErrorBody) {
    t->error_body.append(data, std::min(bytes, kMaxErrorBody - t->error_body.size()));
  }
  return bytes;
}

void record_outcome(Transfer& t, CURLcode code, RequestResult& out) {
  const double now = t.now();
  const long status = response_code(t.easy.get());
  out.http_status = static_cast<int>(status);
  const bool success_status = status >= 200 && status < 300;
  if (code == CURLE_OK && success_status) {
    t.stream.finish(now, out);
  } else if (code == CURLE_OK) {
    t.stream.fail(Failure::Http, str_cat("HTTP ", status, ": ", error_text(t.error_body)), now, out);
  } else if (code == CURLE_OPERATION_TIMEDOUT) {
    t.stream.fail(Failure::Timeout, curl_message(code, t.errbuf), now, out);
  } else {
    // A stream that failed to parse aborted its own transfer: that failure stands.
    t.stream.fail(Failure::Connection, curl_message(code, t.errbuf), now, out);
  }
}

bool is_http_url(const std::string& u) { return starts_with(u, "http://") || starts_with(u, "https://"); }

}  // namespace

Endpoints endpoint_urls(const std::string& url) {
  if (!is_http_url(url)) fail(ErrorKind::InvalidArgument, "--url must start with http:// or https://, got '", url, "'");
  std::string base = url;
  while (ends_with(base, "/")) base.pop_back();
  if (ends_with(base, "/v1/completions")) base.resize(base.size() - std::string_view("/completions").size());
  if (!ends_with(base, "/v1")) base += "/v1";
  return {base + "/completions", base + "/models"};
}

std::string completion_body(const ServerTarget& target, const std::vector<int32_t>& prompt, int64_t output_len) {
  json body = json::object();
  body["model"] = target.model;
  body["prompt"] = prompt;
  body["max_tokens"] = output_len;
  body["min_tokens"] = output_len;  // vLLM's way to hold off EOS; others ignore it
  body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["temperature"] = 0;
  if (target.extra_body.is_object())  // user fields win over the defaults above
    for (auto& [k, v] : target.extra_body.items()) body[k] = v;
  return body.dump();
}

LevelRun run_level(const ServerTarget& target, const std::vector<std::vector<int32_t>>& prompts, int64_t output_len,
                   const LevelLoad& load) {
  if (load.arrivals.size() != prompts.size()) fail(ErrorKind::Internal, "one arrival time per prompt");
  if (load.max_concurrency < 0) fail(ErrorKind::InvalidArgument, "concurrency must be >= 0");
  global_init();
  const std::string url = endpoint_urls(target.url).completions;
  std::unique_ptr<CURLM, CURLMcode (*)(CURLM*)> multi(curl_multi_init(), curl_multi_cleanup);
  if (!multi) fail(ErrorKind::Internal, "curl_multi_init failed");
  HeaderList headers = request_headers(target, true);

  const size_t n = prompts.size();
  LevelRun run;
  run.results.resize(n);
  std::vector<std::unique_ptr<Transfer>> live(n);
  const auto t0 = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  size_t next = 0, done = 0;
  int64_t active = 0;
  auto may_start = [&] { return next < n && (load.max_concurrency == 0 || active < load.max_concurrency); };

  auto start = [&](size_t i) {
    auto t = std::make_unique<Transfer>(i, completion_body(target, prompts[i], output_len), t0, now());
    t->easy.reset(curl_easy_init());
    if (!t->easy) fail(ErrorKind::Internal, "curl_easy_init failed");
    CURL* h = t->easy.get();
    common_options(h, url, headers.get(), target.timeout_s, t->errbuf);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, t->body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(h, CURLOPT_PRIVATE, t.get());
    if (curl_multi_add_handle(multi.get(), h) != CURLM_OK) fail(ErrorKind::Internal, "curl_multi_add_handle failed");
    t->multi = multi.get();
    run.results[i].prompt_len = static_cast<int64_t>(prompts[i].size());
    live[i] = std::move(t);
    ++active;
  };

  while (done < n) {
    while (may_start() && load.arrivals[next] <= now()) start(next++);
    int running = 0;
    curl_multi_perform(multi.get(), &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi.get(), &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      char* priv = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
      auto* t = reinterpret_cast<Transfer*>(priv);
      record_outcome(*t, m->data.result, run.results[t->index]);
      run.duration_s = std::max(run.duration_s, t->now());
      live[t->index].reset();
      --active;
      ++done;
    }
    if (done == n) break;
    // Sleep until a socket has news, or until the next request is due.
    int wait_ms = 100;
    if (may_start())
      wait_ms = static_cast<int>(std::clamp(std::ceil((load.arrivals[next] - now()) * 1000.0), 0.0, 100.0));
    if (wait_ms > 0) curl_multi_poll(multi.get(), nullptr, 0, wait_ms, nullptr);
  }
  return run;
}

std::string discover_model(const ServerTarget& target) {
  global_init();
  const std::string url = endpoint_urls(target.url).models;
  EasyPtr h(curl_easy_init(), curl_easy_cleanup);
  if (!h) fail(ErrorKind::Internal, "curl_easy_init failed");
  HeaderList headers = request_headers(target, false);
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::string body;
  common_options(h.get(), url, headers.get(), std::min(target.timeout_s, 30.0), errbuf);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* out) {
    auto* b = static_cast<std::string*>(out);
    if (b->size() < (1u << 20)) b->append(d, s * n);
    return s * n;
  });
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &body);
  CURLcode code = curl_easy_perform(h.get());
  if (code != CURLE_OK) fail(ErrorKind::Io, "cannot reach ", url, ": ", curl_message(code, errbuf));
  const long status = response_code(h.get());
  if (status != 200) fail(ErrorKind::Io, url, " answered HTTP ", status, ": ", error_text(body));
  json j = json::parse(body, nullptr, false);
  const json* data = j.is_object() && j.contains("data") ? &j["data"] : nullptr;
  if (!data || !data->is_array() || data->empty() || !(*data)[0].is_object() || !(*data)[0].contains("id") ||
      !(*data)[0]["id"].is_string())
    fail(ErrorKind::BadFormat, url, " did not list a model; give --model");
  return (*data)[0]["id"].get<std::string>();
}

}  // namespace ingot::loadgen
