// The HTTP application: routing, API-key auth (constant time, every route
// but /health), CORS (off unless asked), body limits and error shapes. The
// Router is plain C++ (testable without sockets); serve_http binds it to a
// socket with libmicrohttpd (event-driven: connections cost no threads).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "server/http_types.h"

namespace ingot::server {

class Service;

class Router {
 public:
  explicit Router(Service& svc);
  HttpResponse dispatch(const HttpRequest& req);
  // Error body in the shape the path's API uses.
  HttpResponse error_response(const std::string& path, int status, const std::string& message,
                              const std::string& param = "", const std::string& code = "") const;

 private:
  struct Route {
    std::string method, path;
    bool prefix = false;     // path is a prefix ("/v1/models/")
    bool needs_auth = true;
    Handler handler;
  };
  void add(std::string method, std::string path, Handler h, bool prefix = false, bool auth = true);
  bool authorized(const HttpRequest& req) const;
  Service& svc_;
  std::vector<Route> routes_;
};

bool constant_time_equal(const std::string& a, const std::string& b);

// The Access-Control-Allow-Origin value for a request from `origin` when the
// server allows `allowed` ("*" or comma-separated origins); "" sends none.
std::string cors_allow_origin(const std::string& allowed, const std::string& origin);

// Header limits checked before routing.
constexpr size_t kMaxHeaderCount = 64;
constexpr size_t kMaxHeaderBytes = 32u << 10;
constexpr size_t kMaxHeaderLineBytes = 8u << 10;  // one header line (431)
constexpr size_t kMaxUriBytes = 8u << 10;         // path and query (414)

// Serves until `stop` becomes true (checked every ~100 ms); calls on_ready
// with the bound port. Returns false when binding failed. Raises the process's
// open-file limit so --max-connections fits (or lowers the cap, with a warning).
bool serve_http(Router& router, Service& svc, const std::function<void(int)>& on_ready, const std::atomic<bool>& stop);

}  // namespace ingot::server
