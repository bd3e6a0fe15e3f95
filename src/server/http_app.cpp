// The only translation unit that includes cpp-httplib.
#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <thread>

#include "server/http_app.h"
#include "server/json_fields.h"
#include "server/service.h"
#include "util/log.h"
#include "util/strings.h"

namespace ingot::server {

namespace {

bool endpoint_of(int fd, bool peer, std::string* addr, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return false;
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    *port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

// The connection's socket, found by its TCP endpoints (the HTTP library does
// not expose it), so a handler can notice that its client hung up while it
// waits on the engine. -1 when not found.
struct Endpoints {
  std::string remote_addr;
  int remote_port = -1, local_port = -1;
};

int connection_fd(const Endpoints& r) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || fd < 3) continue;
    std::string addr;
    int port = -1;
    if (!endpoint_of(static_cast<int>(fd), true, &addr, &port) || port != r.remote_port || addr != r.remote_addr)
      continue;
    if (!endpoint_of(static_cast<int>(fd), false, &addr, &port) || port != r.local_port) continue;
    found = static_cast<int>(fd);
    break;
  }
  ::closedir(d);
  return found;
}

bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }
  return false;
}

// cpp-httplib parses a body whose Content-Type starts with "multipart/form-data"
// itself, before any handler sees it, and keeps only the parts. ingot parses
// form data with its own parser (server/multipart.h: clear errors, limits,
// fuzzed), so the pre-routing handler, which runs before the body is read,
// hides the type from the library with a leading space that to_request trims.
void keep_multipart_raw(const httplib::Request& req) {
  auto& headers = const_cast<httplib::Request&>(req).headers;  // the library's own request object, not const
  auto range = headers.equal_range("Content-Type");  // the map compares names case-insensitively
  for (auto it = range.first; it != range.second; ++it)
    if (starts_with(it->second, "multipart/form-data")) {
      std::string hidden(1, ' ');
      hidden += it->second;
      it->second = std::move(hidden);
    }
}

class ChunkSink : public StreamSink {
 public:
  explicit ChunkSink(httplib::DataSink& s) : sink_(s) {}
  bool write(std::string_view data) override {
    if (failed_) return false;
    if (!sink_.write(data.data(), data.size())) failed_ = true;
    return !failed_;
  }
  bool failed() const { return failed_; }

 private:
  httplib::DataSink& sink_;
  bool failed_ = false;
};

HttpRequest to_request(const httplib::Request& r) {
  HttpRequest out;
  out.method = r.method;
  out.path = r.path;
  out.body = r.body;
  for (const auto& [k, v] : r.headers) {
    std::string key = k;
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Undoes keep_multipart_raw (the library trims header values, so no value starts with a space).
    out.headers[key] = key == "content-type" ? std::string(trim(v)) : v;
  }
  // Found on first use: most routes never ask.
  auto fd = std::make_shared<int>(-2);
  Endpoints ep{r.remote_addr, r.remote_port, r.local_port};
  out.client_gone = [fd, ep] {
    if (*fd == -2) *fd = connection_fd(ep);
    return peer_closed(*fd);
  };
  return out;
}

// `allow_origin`: the CORS header value for this request ("" for none).
void apply(const HttpResponse& in, httplib::Response& res, const std::string& allow_origin) {
  res.status = in.status;
  for (const auto& [k, v] : in.headers) res.set_header(k, v);
  if (!allow_origin.empty()) res.set_header("Access-Control-Allow-Origin", allow_origin);
  if (!allow_origin.empty() && allow_origin != "*") res.set_header("Vary", "Origin");
  if (!in.stream) {
    res.set_content(in.body, in.content_type);
    return;
  }
  auto stream = in.stream;
  res.set_chunked_content_provider(in.content_type, [stream](size_t, httplib::DataSink& sink) {
    ChunkSink s(sink);
    stream(s);
    if (s.failed()) return false;
    sink.done();
    return true;
  });
}

}  // namespace

bool serve_http(Router& router, Service& svc, const std::function<void(int)>& on_ready, const std::atomic<bool>& stop) {
  const ServeOptions& opt = svc.options();
  httplib::Server http;
  int threads = std::max(4, opt.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(opt.max_body_bytes);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  http.set_keep_alive_timeout(10);
  http.set_tcp_nodelay(true);
  const std::string cors = opt.cors_origin;
  auto allow_origin = [cors](const httplib::Request& req) {
    return cors_allow_origin(cors, req.get_header_value("Origin"));
  };
  auto handle = [&router, allow_origin](const httplib::Request& req, httplib::Response& res) {
    apply(router.dispatch(to_request(req)), res, allow_origin(req));
  };
  // cpp-httplib caps each header line but not their number or total size.
  http.set_pre_routing_handler([&router](const httplib::Request& req, httplib::Response& res) {
    keep_multipart_raw(req);
    size_t bytes = 0;
    for (const auto& [k, v] : req.headers) bytes += k.size() + v.size() + 4;
    if (req.headers.size() <= kMaxHeaderCount && bytes <= kMaxHeaderBytes)
      return httplib::Server::HandlerResponse::Unhandled;
    apply(router.error_response(req.path, 431, "request headers exceed the server's limits (" +
                                std::to_string(kMaxHeaderCount) + " headers, " + std::to_string(kMaxHeaderBytes) +
                                " bytes)"), res, "");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.Get(".*", handle);
  http.Post(".*", handle);
  http.Put(".*", handle);
  http.Delete(".*", handle);
  http.Patch(".*", handle);
  http.Options(".*", [cors, allow_origin, &router](const httplib::Request& req, httplib::Response& res) {
    if (cors.empty()) {
      apply(router.error_response(req.path, 405, "CORS is off; start the server with --cors ORIGIN"), res, "");
      return;
    }
    std::string origin = allow_origin(req);
    if (origin.empty()) {
      apply(router.error_response(req.path, 403, "origin not allowed by --cors"), res, "");
      return;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Origin", origin);
    if (origin != "*") res.set_header("Vary", "Origin");
    res.set_header("Access-Control-Max-Age", "600");
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version");
  });
  // Errors the HTTP layer raises itself (413 body too large, 400 malformed request line).
  http.set_error_handler([&router](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 413 ? "request body is larger than the server's limit"
                                        : "malformed HTTP request (status " + std::to_string(res.status) + ")";
    apply(router.error_response(req.path, res.status, msg), res, "");
  });
  http.set_exception_handler([&router](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    apply(router.error_response(req.path, 500, "internal error"), res, "");
  });
  int port = opt.port;
  if (port == 0) {
    port = http.bind_to_any_port(opt.host);
    if (port <= 0) return false;
  } else if (!http.bind_to_port(opt.host, port)) {
    return false;
  }
  std::atomic<bool> listener_done{false};
  std::thread listener([&] {
    http.listen_after_bind();
    listener_done = true;
  });
  while (!http.is_running() && !listener_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (on_ready && !listener_done.load()) on_ready(port);
  while (!stop.load() && !listener_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http.stop();
  listener.join();
  return true;
}

}  // namespace ingot::server
