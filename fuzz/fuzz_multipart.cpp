// multipart/form-data bodies, as the audio upload route parses them.
// Input: the Content-Type header value, a '\n', then the body (no '\n': all
// header, empty body). Findings: any exception other than the parser's
// Error(InvalidArgument) with a message; an accepted part whose content or
// content type is not inside the body; more parts, or a longer name, than the
// limits allow; and a form that does not parse back to the same parts once
// written out again with the same boundary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/multipart.h"
#include "util/error.h"

namespace {

using ingot::server::MultipartLimits;
using ingot::server::MultipartPart;

bool inside(std::string_view part, std::string_view body) {
  return part.data() >= body.data() && part.data() + part.size() <= body.data() + body.size();
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The parts written out as a client would send them.
std::string write_form(const std::vector<MultipartPart>& parts, const std::string& boundary) {
  std::string out;
  for (const MultipartPart& p : parts) {
    out += "--" + boundary + "\r\nContent-Disposition: form-data; name=" + quoted(p.name);
    if (!p.filename.empty()) out += "; filename=" + quoted(p.filename);
    out += "\r\n";
    if (!p.content_type.empty()) out += "Content-Type: " + std::string(p.content_type) + "\r\n";
    out += "\r\n";
    out += p.content;
    out += "\r\n";
  }
  return out + "--" + boundary + "--\r\n";
}

// Small limits, so the fuzzer reaches them.
MultipartLimits limits() {
  MultipartLimits lim;
  lim.max_parts = 16;
  lim.max_header_bytes = 512;
  lim.max_header_lines = 6;
  return lim;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nl = input.find('\n');
  std::string_view type = input.substr(0, nl);
  std::string_view body = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
  const MultipartLimits lim = limits();
  std::vector<MultipartPart> parts;
  std::string boundary;
  try {
    if (!ingot::server::is_multipart_form_data(type)) {
      // Still exercise the boundary parameter parsing of any header.
      ingot::server::multipart_boundary(type);
      return 0;
    }
    boundary = ingot::server::multipart_boundary(type);
    if (boundary.empty() || boundary.size() > 70) __builtin_trap();
    parts = ingot::server::parse_form_data(type, body, lim);
  } catch (const ingot::Error& e) {
    if (e.kind() != ingot::ErrorKind::InvalidArgument || std::string_view(e.what()).empty()) __builtin_trap();
    return 0;
  }
  if (parts.size() > lim.max_parts) __builtin_trap();
  for (const MultipartPart& p : parts) {
    if (!inside(p.content, body)) __builtin_trap();
    if (!p.content_type.empty() && !inside(p.content_type, body)) __builtin_trap();
    if (p.name.size() > lim.max_header_bytes || p.filename.size() > lim.max_header_bytes) __builtin_trap();
  }
  // Written out again, the form parses to the same parts.
  std::string again = write_form(parts, boundary);
  std::vector<MultipartPart> back;
  try {
    MultipartLimits roomy = lim;
    roomy.max_header_bytes = 4 * lim.max_header_bytes;  // escapes may lengthen the names
    back = ingot::server::parse_multipart(again, boundary, roomy);
  } catch (const ingot::Error&) {
    __builtin_trap();
  }
  if (back.size() != parts.size()) __builtin_trap();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (back[i].name != parts[i].name || back[i].filename != parts[i].filename ||
        back[i].content_type != parts[i].content_type || back[i].content != parts[i].content)
      __builtin_trap();
  }
  return 0;
}
