// The only translation unit that includes libmicrohttpd (docs/server.md says
// why that library). One event thread (epoll) reads every connection; a
// request reaches a worker thread only once its head and body are complete,
// so idle, half-open and slow connections cost a socket and a small buffer,
// never a thread. Our Listener accepts and enforces the connection caps; the
// ConnectionTable holds the head deadline; libmicrohttpd's per-connection
// inactivity timeout closes idle keep-alive connections, stalled uploads and
// stalled responses.
#include <microhttpd.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "server/connection_table.h"
#include "server/http_app.h"
#include "server/listener.h"
#include "server/service.h"
#include "server/stream_channel.h"
#include "server/worker_pool.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::server {

namespace {

using Clock = std::chrono::steady_clock;
// Bytes of a streamed response queued between its worker and the socket.
constexpr size_t kStreamQueueBytes = 64u << 10;
// The kernel's send buffer for streamed responses: a client that stops reading
// is noticed after this much, not after megabytes of autotuned buffer.
constexpr int kStreamSendBuffer = 64 << 10;
// libmicrohttpd's per-connection memory (request head + read buffer): above
// the header caps, so those are ours to answer with a JSON 431.
constexpr size_t kConnectionMemory = kMaxHeaderBytes * 3;
// The least memory request bodies may take at once (App::body_budget).
constexpr size_t kMinBodyBudget = 256u << 20;

bool peer_closed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

struct App;

// One request on a connection, from its complete head to the end of its
// response. Shared by the event thread and the worker that runs its handler.
struct Exchange {
  App* app = nullptr;
  MHD_Connection* conn = nullptr;
  int fd = -1;
  HttpRequest req;
  std::string allow_origin;  // CORS header value for this request ("" for none)
  int refused = 0;           // 413 (body past --max-body-mb) or 503 (body budget spent): read on, then answer
  size_t discarded = 0;
  size_t reserved = 0;  // of App::body_bytes
  enum class Phase { Reading, Handling, Answered } phase = Phase::Reading;
  // Filled by the worker before it resumes the connection.
  HttpResponse res;
  std::shared_ptr<StreamChannel> channel;

  std::mutex mu;
  bool gone = false;  // the library is done with the connection (its socket may be closed)
  bool client_gone();
  ~Exchange();
};

struct App {
  App(Router& r, Service& s, ConnectionLimits limits)
      : router(r), svc(s), opt(s.options()), table(limits),
        pool(static_cast<size_t>(std::max(1, opt.http_threads))),
        body_budget(opt.body_budget_bytes ? opt.body_budget_bytes
                                          : std::max<size_t>(kMinBodyBudget, 8 * opt.max_body_bytes)) {}
  Router& router;
  Service& svc;
  const ServeOptions& opt;
  ConnectionTable table;
  WorkerPool pool;
  MHD_Daemon* daemon = nullptr;
  std::mutex submit_mu;  // orders "stopping" against handing work to the pool
  std::atomic<bool> stopping{false};
  // Request bodies held at once, over all connections: each may hold
  // --max-body-mb, and thousands of them would not fit in memory.
  const size_t body_budget;
  std::atomic<size_t> body_bytes{0};
};

Exchange::~Exchange() {
  if (app) app->body_bytes -= reserved;
}

// Takes `n` more bytes of the body budget for `ex`; false when it is spent.
bool reserve_body(Exchange& ex, size_t n) {
  std::atomic<size_t>& used = ex.app->body_bytes;
  size_t now = used.load();
  do {
    if (now + n > ex.app->body_budget) return false;
  } while (!used.compare_exchange_weak(now, now + n));
  ex.reserved += n;
  return true;
}

const char* kBodyBudgetSpent = "the server holds too many request bodies at once; retry shortly";

bool Exchange::client_gone() {
  std::lock_guard<std::mutex> lock(mu);
  // While `gone` is false the library has not closed the socket, so `fd` is this connection's.
  return gone || app->stopping.load() || peer_closed(fd);
}

// A complete HTTP/1.1 response for a socket the library does not own (refusals, head timeouts).
std::string raw_response(const HttpResponse& r) {
  const char* reason = MHD_get_reason_phrase_for(static_cast<unsigned>(r.status));
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + ' ' + (reason ? reason : "") + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  out += "Connection: close\r\n\r\n" + r.body;
  return out;
}

int connection_fd(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info ? info->connect_fd : -1;
}

// Collects the request's headers (lower-case names) and counts them as sent.
struct HeaderReader {
  HttpRequest* req;
  size_t count = 0, bytes = 0, longest = 0;
};

MHD_Result add_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* h = static_cast<HeaderReader*>(cls);
  std::string name = key ? key : "";
  std::string text = value ? value : "";
  size_t line = name.size() + text.size() + 4;
  ++h->count;
  h->bytes += line;
  h->longest = std::max(h->longest, line);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  h->req->headers[name] = std::move(text);
  return MHD_YES;
}

MHD_Result add_query_bytes(void* cls, MHD_ValueKind, const char* key, const char* value) {
  *static_cast<size_t*>(cls) += (key ? std::strlen(key) : 0) + (value ? std::strlen(value) : 0) + 2;
  return MHD_YES;
}

struct StreamSource {
  std::shared_ptr<StreamChannel> channel;
  MHD_Connection* conn;
};

ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
  auto* s = static_cast<StreamSource*>(cls);
  size_t n = 0;
  // Parking suspends the connection under the channel's lock, so the worker's
  // resume (on its next write) always comes after the suspend.
  switch (s->channel->read(buf, max, &n, [s] { MHD_suspend_connection(s->conn); })) {
    case StreamChannel::Read::Data: return static_cast<ssize_t>(n);
    case StreamChannel::Read::Parked: return 0;
    case StreamChannel::Read::End: return MHD_CONTENT_READER_END_OF_STREAM;
    case StreamChannel::Read::Closed: break;
  }
  return MHD_CONTENT_READER_END_WITH_ERROR;
}

void free_stream(void* cls) {
  auto* s = static_cast<StreamSource*>(cls);
  s->channel->close();  // the response is over (sent or abandoned): the worker's writes fail from now on
  delete s;
}

MHD_Result queue(Exchange& ex, const HttpResponse& res) {
  MHD_Response* r;
  if (ex.channel) {
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16u << 10, &read_stream,
                                          new StreamSource{ex.channel, ex.conn}, &free_stream);
    ::setsockopt(ex.fd, SOL_SOCKET, SO_SNDBUF, &kStreamSendBuffer, sizeof(kStreamSendBuffer));
  } else {
    r = MHD_create_response_from_buffer(res.body.size(), const_cast<char*>(res.body.data()), MHD_RESPMEM_MUST_COPY);
  }
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", res.content_type.c_str());
  for (const auto& [k, v] : res.headers) MHD_add_response_header(r, k.c_str(), v.c_str());
  if (!ex.allow_origin.empty()) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", ex.allow_origin.c_str());
    if (ex.allow_origin != "*") MHD_add_response_header(r, "Vary", "Origin");
  }
  ex.phase = Exchange::Phase::Answered;
  MHD_Result ok = MHD_queue_response(ex.conn, static_cast<unsigned>(res.status), r);
  MHD_destroy_response(r);
  return ok;
}

MHD_Result queue_error(Exchange& ex, int status, const std::string& message) {
  return queue(ex, ex.app->router.error_response(ex.req.path, status, message));
}

// CORS preflight, answered on the event thread.
HttpResponse preflight(App& app, const HttpRequest& req) {
  const std::string& cors = app.opt.cors_origin;
  if (cors.empty()) return app.router.error_response(req.path, 405, "CORS is off; start the server with --cors ORIGIN");
  std::string origin = cors_allow_origin(cors, req.header("origin"));
  if (origin.empty()) return app.router.error_response(req.path, 403, "origin not allowed by --cors");
  HttpResponse r;
  r.status = 204;
  r.content_type = "text/plain";
  r.headers = {{"Access-Control-Max-Age", "600"},
               {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
               {"Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version"}};
  return r;
}

// Runs a request's handler on a worker, then hands the answer to the event thread.
void handle(const std::shared_ptr<Exchange>& ex) {
  App& app = *ex->app;
  HttpResponse res = app.stopping.load() ? app.router.error_response(ex->req.path, 503, "server is shutting down")
                                         : app.router.dispatch(ex->req);
  auto stream = std::move(res.stream);
  res.stream = nullptr;
  if (stream) {
    MHD_Connection* conn = ex->conn;  // the reader parks (suspends) only while this worker still writes
    ex->channel = std::make_shared<StreamChannel>(kStreamQueueBytes, std::chrono::seconds(app.opt.io_timeout_s),
                                                  [conn] { MHD_resume_connection(conn); });
  }
  ex->res = std::move(res);
  // The connection is suspended until now, so the library cannot have closed it.
  MHD_resume_connection(ex->conn);
  if (!stream) return;
  class Sink : public StreamSink {
   public:
    explicit Sink(StreamChannel& c) : c_(c) {}
    bool write(std::string_view data) override { return c_.write(data); }
   private:
    StreamChannel& c_;
  } sink(*ex->channel);
  try {
    stream(sink);
  } catch (const std::exception& e) {
    log::error("stream of ", ex->req.path, " failed: ", e.what());
  }
  if (ex->channel->stalled()) app.svc.metrics().count_http_event("stalled_stream");
  ex->channel->finish();
}

MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*,
                      const char* upload, size_t* upload_size, void** ctx) {
  App& app = *static_cast<App*>(cls);
  auto* holder = static_cast<std::shared_ptr<Exchange>*>(*ctx);
  if (!holder) {  // the head is complete
    auto ex = std::make_shared<Exchange>();
    *ctx = new std::shared_ptr<Exchange>(ex);
    ex->app = &app;
    ex->conn = conn;
    ex->fd = connection_fd(conn);
    ex->req.method = method ? method : "";
    if (ex->req.method == "HEAD") ex->req.method = "GET";  // the library sends no body for HEAD
    ex->req.path = url ? url : "";
    HeaderReader headers{&ex->req};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, &add_header, &headers);
    ex->req.client_gone = [weak = std::weak_ptr<Exchange>(ex)] {
      auto e = weak.lock();
      return !e || e->client_gone();
    };
    ex->allow_origin = cors_allow_origin(app.opt.cors_origin, ex->req.header("origin"));
    app.table.request_started(ex->fd);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, static_cast<unsigned>(app.opt.io_timeout_s));
    if (headers.count > kMaxHeaderCount || headers.bytes > kMaxHeaderBytes || headers.longest > kMaxHeaderLineBytes) {
      ex->allow_origin.clear();
      return queue_error(*ex, 431, "request headers exceed the server's limits (" + std::to_string(kMaxHeaderCount) +
                                   " headers, " + std::to_string(kMaxHeaderBytes) + " bytes, " +
                                   std::to_string(kMaxHeaderLineBytes) + " bytes in one line)");
    }
    size_t uri_bytes = ex->req.path.size();
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, &add_query_bytes, &uri_bytes);
    if (uri_bytes > kMaxUriBytes)
      return queue_error(*ex, 414, "request URI is longer than " + std::to_string(kMaxUriBytes) + " bytes");
    std::string length = ex->req.header("content-length");
    if (!length.empty()) {
      unsigned long long n = std::strtoull(length.c_str(), nullptr, 10);
      if (n > app.opt.max_body_bytes) return queue_error(*ex, 413, "request body is larger than the server's limit");
      if (!reserve_body(*ex, static_cast<size_t>(n))) return queue_error(*ex, 503, kBodyBudgetSpent);
    }
    return MHD_YES;
  }
  Exchange& ex = **holder;
  if (*upload_size > 0) {
    size_t want = ex.req.body.size() + *upload_size;
    if (!ex.refused && want > app.opt.max_body_bytes) ex.refused = 413;
    if (!ex.refused && want > ex.reserved && !reserve_body(ex, want - ex.reserved)) ex.refused = 503;
    if (!ex.refused) {
      ex.req.body.append(upload, *upload_size);
    } else {  // a chunked body refused mid-way: read on (discarding) to answer, unless it goes on and on
      ex.req.body.clear();
      ex.discarded += *upload_size;
      if (ex.discarded > app.opt.max_body_bytes) return MHD_NO;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (ex.phase == Exchange::Phase::Handling) return queue(ex, ex.res);  // resumed by the worker
  if (ex.phase == Exchange::Phase::Answered) return MHD_YES;
  if (ex.refused)
    return queue_error(ex, ex.refused, ex.refused == 413 ? "request body is larger than the server's limit"
                                                         : kBodyBudgetSpent);
  // Answered here, never waiting for a worker: liveness probes and preflights.
  if (ex.req.method == "OPTIONS") {
    HttpResponse r = preflight(app, ex.req);
    if (r.status != 204) ex.allow_origin.clear();
    return queue(ex, r);
  }
  if (ex.req.method == "GET" && ex.req.path == "/health") return queue(ex, app.router.dispatch(ex.req));
  std::lock_guard<std::mutex> lock(app.submit_mu);
  if (app.stopping.load()) return queue_error(ex, 503, "server is shutting down");
  ex.phase = Exchange::Phase::Handling;
  MHD_suspend_connection(conn);
  app.pool.submit([ex = *holder] { handle(ex); });
  return MHD_YES;
}

void on_completed(void* cls, MHD_Connection* conn, void** ctx, MHD_RequestTerminationCode why) {
  App& app = *static_cast<App*>(cls);
  auto* holder = static_cast<std::shared_ptr<Exchange>*>(*ctx);
  if (!holder) return;
  *ctx = nullptr;
  auto ex = *holder;
  delete holder;
  {
    std::lock_guard<std::mutex> lock(ex->mu);
    ex->gone = true;
  }
  if (ex->channel) ex->channel->close();
  if (why == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) app.svc.metrics().count_http_event("io_timeout");
  if (why == MHD_REQUEST_TERMINATED_COMPLETED_OK) {  // the connection may carry another request
    app.table.request_finished(ex->fd, socket_bytes_received(ex->fd), Clock::now());
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, static_cast<unsigned>(app.opt.keep_alive_timeout_s));
  }
}

void on_connection(void* cls, MHD_Connection* conn, void**, MHD_ConnectionNotificationCode what) {
  if (what != MHD_CONNECTION_NOTIFY_CLOSED) return;
  App& app = *static_cast<App*>(cls);
  app.table.release(connection_fd(conn));  // before the library closes the socket
  app.svc.metrics().set_http_connections(app.table.open());
}

void on_library_log(void*, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  std::string msg(buf);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
  log::debug("HTTP: ", msg);
}

std::string refusal(App& app, ConnectionTable::Admission why, const std::string& client) {
  app.svc.metrics().count_http_event(why == ConnectionTable::Admission::ClientFull ? "refused_client_limit"
                                                                                  : "refused_total_limit");
  std::string msg = why == ConnectionTable::Admission::ClientFull
                        ? "too many open connections from " + client + " (limit " +
                              std::to_string(app.opt.max_connections_per_client) + "); close idle connections and retry"
                        : "the server has too many open connections (limit " +
                              std::to_string(app.table.limits().max_total) + "); retry shortly";
  return raw_response(app.router.error_response("", 503, msg, "", "too_many_connections"));
}

}  // namespace

bool serve_http(Router& router, Service& svc, const std::function<void(int)>& on_ready, const std::atomic<bool>& stop) {
  const ServeOptions& opt = svc.options();
  ConnectionLimits limits{opt.max_connections, opt.max_connections_per_client,
                          std::chrono::seconds(opt.header_timeout_s)};
  // Every connection is a descriptor; the rest of the process needs some too.
  constexpr size_t kReservedFds = 256;
  size_t fds = raise_fd_limit(limits.max_total + kReservedFds);
  if (fds < limits.max_total + kReservedFds) {
    limits.max_total = fds > kReservedFds + 16 ? fds - kReservedFds : 16;
    log::warn("HTTP: the open-file limit (", fds, ") leaves room for ", limits.max_total,
              " connections, not --max-connections ", opt.max_connections, "; raise `ulimit -n` for more");
  }
  App app(router, svc, limits);
  std::unique_ptr<Listener> listener;
  try {
    listener = std::make_unique<Listener>(app.opt.host, app.opt.port, app.table, Listener::Hooks{
        [&app](int fd, const sockaddr* addr, socklen_t len) {
          app.svc.metrics().set_http_connections(app.table.open());
          // On failure the library has closed the socket already.
          if (MHD_add_connection(app.daemon, fd, addr, len) != MHD_YES) app.table.release(fd);
        },
        [&app](ConnectionTable::Admission why, const std::string& client) { return refusal(app, why, client); },
        [&app] {
          size_t n = app.table.close_overdue(Clock::now(), &socket_bytes_received, [&app](int fd) {
            std::string msg = "the request head did not arrive within " + std::to_string(app.opt.header_timeout_s) +
                              " s (--header-timeout)";
            std::string bytes = raw_response(app.router.error_response("", 408, msg));
            [[maybe_unused]] ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            ::shutdown(fd, SHUT_RDWR);  // the event thread then sees the end and closes it
          });
          for (size_t i = 0; i < n; ++i) app.svc.metrics().count_http_event("header_timeout");
        }});
  } catch (const Error& e) {
    log::debug("HTTP: ", e.what());  // the caller reports the failed bind
    return false;
  }
  app.daemon = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0,
      nullptr, nullptr, &on_request, &app,
      MHD_OPTION_EXTERNAL_LOGGER, &on_library_log, nullptr,
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(limits.max_total + 64),
      // A new connection is the head deadline's (which answers 408) until its first request completes.
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(app.opt.header_timeout_s + 1),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory,
      MHD_OPTION_NOTIFY_COMPLETED, &on_completed, &app,
      MHD_OPTION_NOTIFY_CONNECTION, &on_connection, &app,
      MHD_OPTION_END);
  if (!app.daemon) {
    log::error("HTTP: cannot start the event loop");
    return false;
  }
  std::thread accepting([&] { listener->run(); });
  if (on_ready) on_ready(listener->port());
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Stop order: no new connections; running handlers see their client as
  // gone and finish; then the event loop (which refuses to stop while a
  // connection waits suspended on a worker).
  listener->stop();
  accepting.join();
  {
    std::lock_guard<std::mutex> lock(app.submit_mu);
    app.stopping = true;
  }
  app.pool.shutdown();
  MHD_stop_daemon(app.daemon);
  return true;
}

}  // namespace ingot::server
