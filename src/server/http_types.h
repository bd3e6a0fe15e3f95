// The HTTP surface the routes see; only http_app.cpp knows the HTTP library.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ingot::server {

struct HttpRequest {
  std::string method, path;
  std::string body;  // raw, multipart/form-data included (routes parse it with server/multipart.h)
  std::map<std::string, std::string> headers;  // lower-case names
  // True once the client has closed its connection.
  std::function<bool()> client_gone = [] { return false; };
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Streamed body writer; write() returns false once the client is gone.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed (chunked) by calling this after the headers.
  std::function<void(StreamSink&)> stream;
};

using Handler = std::function<HttpResponse(const HttpRequest&)>;

}  // namespace ingot::server
