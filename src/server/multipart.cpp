#include "server/multipart.h"

#include <cstring>

#include "util/error.h"

namespace ingot::server {

namespace {

constexpr size_t kMaxBoundary = 70;  // RFC 2046

[[noreturn]] void bad(const std::string& msg) { fail(ErrorKind::InvalidArgument, "malformed multipart body: ", msg); }

bool is_ws(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ws(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// RFC 7230 token characters.
bool is_tchar(char c) {
  auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f && !std::strchr("\"(),/:;<=>?@[\\]{}", c);
}

// Input bytes for an error message: at most 40, non-printable ones as \xNN.
std::string shown(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f) {
      out += s[i];
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out + (s.size() > 40 ? "...'" : "'");
}

struct Param {
  std::string_view name;
  std::string value;
};

// `type; a=b; c="d"`: returns the trimmed type and appends the parameters.
// Quoted values drop their quotes; `\"` and `\\` are escapes, any other
// backslash is kept (browsers send Windows paths unescaped).
std::string_view split_params(std::string_view v, std::vector<Param>& out, const std::string& what) {
  size_t i = v.find(';');
  std::string_view type = trim_ws(v.substr(0, i));
  if (i == std::string_view::npos) return type;
  auto skip_ws = [&] {
    while (i < v.size() && is_ws(v[i])) ++i;
  };
  while (i < v.size()) {
    ++i;  // the ';'
    skip_ws();
    if (i == v.size()) break;
    if (v[i] == ';') continue;
    size_t n0 = i;
    while (i < v.size() && is_tchar(v[i])) ++i;
    std::string_view name = v.substr(n0, i - n0);
    if (name.empty()) bad("unexpected " + shown(v.substr(i, 1)) + " in the parameters of " + what);
    skip_ws();
    if (i == v.size() || v[i] != '=') bad("parameter " + shown(name) + " of " + what + " has no value");
    ++i;
    skip_ws();
    std::string value;
    if (i < v.size() && v[i] == '"') {
      ++i;
      bool closed = false;
      while (i < v.size()) {
        char c = v[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < v.size() && (v[i] == '"' || v[i] == '\\')) c = v[i++];
        value += c;
      }
      if (!closed) bad("the quoted value of " + shown(name) + " in " + what + " is not closed");
      skip_ws();
    } else {
      size_t v0 = i;
      while (i < v.size() && v[i] != ';') ++i;
      value = std::string(trim_ws(v.substr(v0, i - v0)));
    }
    if (i < v.size() && v[i] != ';')
      bad("unexpected " + shown(v.substr(i, 1)) + " after parameter " + shown(name) + " of " + what);
    for (const Param& p : out)
      if (iequals(p.name, name)) bad("parameter " + shown(name) + " appears twice in " + what);
    out.push_back({name, std::move(value)});
  }
  return type;
}

// One part's header block (the lines between the boundary line and the empty line).
void parse_part_headers(std::string_view block, size_t index, const MultipartLimits& limits, MultipartPart& part) {
  std::string where = "part " + std::to_string(index + 1);
  bool disposition = false, type_seen = false;
  size_t lines = 0;
  while (!block.empty()) {
    size_t eol = block.find("\r\n");
    std::string_view line = block.substr(0, eol);
    block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 2);
    if (++lines > limits.max_header_lines)
      bad(where + " has more than " + std::to_string(limits.max_header_lines) + " header lines");
    if (!line.empty() && is_ws(line.front())) bad(where + " has a folded header line (not allowed in form data)");
    size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || name.empty())
      bad(where + " has a header line without a name and ':': " + shown(line));
    for (char c : name)
      if (!is_tchar(c)) bad(where + " has an invalid header name " + shown(name));
    std::string_view value = trim_ws(line.substr(colon + 1));
    if (iequals(name, "content-disposition")) {
      if (disposition) bad(where + " has two Content-Disposition headers");
      disposition = true;
      std::vector<Param> params;
      std::string what = where + "'s Content-Disposition";
      std::string_view type = split_params(value, params, what);
      if (!iequals(type, "form-data")) bad(what + " is " + shown(type) + ", not 'form-data'");
      bool named = false;
      for (Param& p : params) {
        if (iequals(p.name, "name")) {
          part.name = std::move(p.value);
          named = true;
        } else if (iequals(p.name, "filename")) {
          part.filename = std::move(p.value);
        }
      }
      if (!named) bad(what + " has no name parameter");
    } else if (iequals(name, "content-type")) {
      if (type_seen) bad(where + " has two Content-Type headers");
      type_seen = true;
      part.content_type = value;
    }  // other headers (Content-Transfer-Encoding, ...) are ignored, as RFC 7578 allows
  }
  if (!disposition) bad(where + " has no Content-Disposition header (every form part needs one with its name)");
}

}  // namespace

bool is_multipart_form_data(std::string_view content_type) {
  std::string_view type = trim_ws(content_type.substr(0, content_type.find(';')));
  return iequals(type, "multipart/form-data");
}

std::string multipart_boundary(std::string_view content_type) {
  std::vector<Param> params;
  split_params(content_type, params, "the Content-Type header");
  for (const Param& p : params) {
    if (!iequals(p.name, "boundary")) continue;
    if (p.value.empty()) bad("the Content-Type header's boundary is empty");
    if (p.value.size() > kMaxBoundary)
      bad("the Content-Type header's boundary is " + std::to_string(p.value.size()) + " bytes; at most 70 are allowed");
    for (char c : p.value) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) bad("the Content-Type header's boundary holds the byte " + shown(std::string(1, c)));
    }
    return p.value;
  }
  bad("the Content-Type header has no boundary parameter (expected multipart/form-data; boundary=...)");
}

std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary,
                                           const MultipartLimits& limits) {
  INGOT_CHECK(!boundary.empty());
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  // The first boundary line: at the very start, or after the preamble's line break.
  size_t pos = body.compare(0, dash.size(), dash) == 0 ? 0 : body.find(delimiter);
  if (pos == std::string_view::npos)
    bad("no boundary line " + shown(dash) + " (the body does not use the boundary of its Content-Type header)");
  if (pos != 0) pos += 2;
  std::vector<MultipartPart> parts;
  for (;;) {
    pos += dash.size();  // just after a boundary line's "--boundary"
    if (body.compare(pos, 2, "--") == 0) return parts;  // the closing boundary; the epilogue is ignored
    while (pos < body.size() && is_ws(body[pos])) ++pos;  // transport padding
    if (pos == body.size()) bad("the body ends after a boundary line, without the closing " + shown(dash + "--"));
    if (body.compare(pos, 2, "\r\n") != 0)
      bad("a boundary line is followed by " + shown(body.substr(pos, 8)) + " instead of a line break or '--'");
    pos += 2;
    if (parts.size() == limits.max_parts) bad("more than " + std::to_string(limits.max_parts) + " parts");
    std::string where = "part " + std::to_string(parts.size() + 1);
    // The header block ends at an empty line; a part may have none ("\r\n" at once).
    size_t content;
    std::string_view headers;
    if (body.compare(pos, 2, "\r\n") == 0) {
      content = pos + 2;
    } else {
      size_t end = body.substr(pos, limits.max_header_bytes + 4).find("\r\n\r\n");
      if (end == std::string_view::npos) {
        if (body.size() - pos > limits.max_header_bytes)
          bad(where + "'s headers are longer than " + std::to_string(limits.max_header_bytes) + " bytes");
        bad(where + "'s headers do not end with an empty line (truncated body?)");
      }
      headers = body.substr(pos, end);
      content = pos + end + 4;
    }
    MultipartPart part;
    parse_part_headers(headers, parts.size(), limits, part);
    size_t end = body.find(delimiter, content);
    if (end == std::string_view::npos)
      bad(where + " (" + shown(part.name) + ") is not followed by a boundary line: the body is truncated or its "
          "boundary is not " + shown(std::string(boundary)));
    part.content = body.substr(content, end - content);
    parts.push_back(std::move(part));
    pos = end + 2;
  }
}

std::vector<MultipartPart> parse_form_data(std::string_view content_type, std::string_view body,
                                           const MultipartLimits& limits) {
  if (!is_multipart_form_data(content_type))
    fail(ErrorKind::InvalidArgument, "expected a multipart/form-data body (got Content-Type ",
         shown(content_type), ")");
  return parse_multipart(body, multipart_boundary(content_type), limits);
}

}  // namespace ingot::server
