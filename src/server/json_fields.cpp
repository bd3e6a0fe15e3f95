#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"
#include "util/error.h"

namespace ingot::server {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

json parse_json_body(std::string_view body) {
  if (body.empty()) bad_request("request body is empty; expected a JSON object");
  if (!is_valid_utf8(body)) bad_request("request body is not valid UTF-8");
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("request body is not valid JSON");
  if (!j.is_object()) bad_request("request body must be a JSON object");
  return j;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {
const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<std::string> opt_string(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_request(std::string("'") + key + "' must be a string", key);
  return v->get<std::string>();
}

std::optional<double> opt_number(const json& o, const char* key, double lo, double hi) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_request(std::string("'") + key + "' must be a number", key);
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad_request(str_cat("'", key, "' must be between ", lo, " and ", hi, ", got ", d), key);
  return d;
}

std::optional<int64_t> opt_int(const json& o, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (d != std::floor(d)) bad_request(std::string("'") + key + "' must be an integer", key);
  } else if (!v->is_number()) {
    bad_request(std::string("'") + key + "' must be an integer", key);
  }
  if (v->is_number_float() && (v->get<double>() < static_cast<double>(lo) || v->get<double>() > static_cast<double>(hi)))
    bad_request(str_cat("'", key, "' must be between ", lo, " and ", hi), key);
  int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                  ? INT64_MAX
                  : (v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>());
  if (x < lo || x > hi) bad_request(str_cat("'", key, "' must be between ", lo, " and ", hi, ", got ", x), key);
  return x;
}

std::optional<bool> opt_bool(const json& o, const char* key) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_request(std::string("'") + key + "' must be a boolean", key);
  return v->get<bool>();
}

const json* opt_array(const json& o, const char* key) {
  const json* v = field(o, key);
  if (v && !v->is_array()) bad_request(std::string("'") + key + "' must be an array", key);
  return v;
}

const json* opt_object(const json& o, const char* key) {
  const json* v = field(o, key);
  if (v && !v->is_object()) bad_request(std::string("'") + key + "' must be an object", key);
  return v;
}

std::string req_string(const json& o, const char* key) {
  auto s = opt_string(o, key);
  if (!s) bad_request(std::string("'") + key + "' is required", key);
  return *s;
}

}  // namespace ingot::server
