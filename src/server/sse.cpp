#include "server/sse.h"

namespace ingot::server {

namespace {
void append_data_lines(std::string& out, std::string_view payload) {
  size_t start = 0;
  while (true) {
    size_t nl = payload.find('\n', start);
    out += "data: ";
    out.append(payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
}
}  // namespace

std::string sse_data(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  append_data_lines(out, payload);
  return out;
}

std::string sse_event(std::string_view name, std::string_view payload) {
  std::string out = "event: ";
  out.append(name);
  out += '\n';
  append_data_lines(out, payload);
  return out;
}

}  // namespace ingot::server
