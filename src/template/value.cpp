#include "template/value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace ingot::tmpl {

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.hint = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.type = Type::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.type = Type::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.type = Type::Int;
  v.i = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.type = Type::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.type = Type::String;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
uint32_t value_depth(const Value& v) {
  if (v.type == Value::Type::List) return v.list->depth;
  if (v.type == Value::Type::Dict) return v.dict->depth;
  return 0;
}

static void check_depth(uint32_t depth) {
  if (depth > kMaxValueDepth)
    fail(ErrorKind::InvalidArgument, "chat template: value nested deeper than ", kMaxValueDepth, " levels");
}

Value Value::markup(std::string x) {
  Value v = string(std::move(x));
  v.safe = true;
  return v;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

static Value make_list(std::vector<Value> items, ListObj::Kind kind) {
  uint32_t depth = 1;
  for (const auto& item : items) depth = std::max(depth, value_depth(item) + 1);
  check_depth(depth);
  Value v;
  v.type = Value::Type::List;
  v.list = std::make_shared<ListObj>();
  v.list->kind = kind;
  v.list->depth = depth;
  v.list->items = std::move(items);
  return v;
}
Value Value::list_of(std::vector<Value> items) { return make_list(std::move(items), ListObj::Kind::List); }
Value Value::tuple_of(std::vector<Value> items) { return make_list(std::move(items), ListObj::Kind::Tuple); }
Value Value::iterator_of(std::vector<Value> items) {
  return make_list(std::move(items), ListObj::Kind::Iterator);
}
Value Value::new_dict() {
  Value v;
  v.type = Type::Dict;
  v.dict = std::make_shared<DictObj>();
  return v;
}
Value Value::function(std::string name, NativeFn fn) {
  Value v;
  v.type = Type::Function;
  v.fn = std::make_shared<FunctionObj>(FunctionObj{std::move(name), std::move(fn)});
  return v;
}
bool Value::is_mapping() const { return type == Type::Dict && dict->kind == DictObj::Kind::Dict; }

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}
const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.type == Value::Type::String && *k.s == key) return &v;
  return nullptr;
}
void DictObj::set(const Value& key, Value v) {
  uint32_t d = std::max(value_depth(key), value_depth(v)) + 1;
  check_depth(d);
  depth = std::max(depth, d);
  for (auto& [k, old] : items)
    if (py_equal(k, key)) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

// ---- Python semantics -------------------------------------------------------

bool truthy(const Value& v) {
  switch (v.type) {
    case Value::Type::Undefined:
    case Value::Type::None: return false;
    case Value::Type::Bool: return v.b;
    case Value::Type::Int: return v.i != 0;
    case Value::Type::Float: return v.f != 0.0;
    case Value::Type::String: return !v.s->empty();
    case Value::Type::List: return v.list->kind == ListObj::Kind::Iterator || !v.list->items.empty();
    case Value::Type::Dict: return v.dict->kind != DictObj::Kind::Dict || !v.dict->items.empty();
    case Value::Type::Function: return true;
  }
  return false;
}

namespace {
// Cyclic values (a namespace holding itself) would recurse forever.
thread_local int g_recursion = 0;
struct RecursionGuard {
  RecursionGuard() {
    if (++g_recursion > 2000) {
      g_recursion = 0;
      fail(ErrorKind::InvalidArgument, "chat template: value is nested too deeply (or contains itself)");
    }
  }
  ~RecursionGuard() { if (g_recursion > 0) --g_recursion; }
};
}  // namespace

bool py_equal(const Value& a, const Value& b) {
  RecursionGuard guard;
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.type != T::Float && b.type != T::Float)
      return (a.type == T::Bool ? a.b : a.i) == (b.type == T::Bool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case T::Undefined:
    case T::None: return true;
    case T::String: return *a.s == *b.s;
    case T::List: {
      if (a.list == b.list) return true;
      bool a_tuple = a.list->kind == ListObj::Kind::Tuple, b_tuple = b.list->kind == ListObj::Kind::Tuple;
      if (a.list->kind == ListObj::Kind::Iterator || b.list->kind == ListObj::Kind::Iterator) return false;
      if (a_tuple != b_tuple || a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!py_equal(a.list->items[k], b.list->items[k])) return false;
      return true;
    }
    case T::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->kind != DictObj::Kind::Dict || b.dict->kind != DictObj::Kind::Dict) return false;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    case T::Function: return a.fn == b.fn;
    default: return false;
  }
}

int py_compare(const Value& a, const Value& b, int line) {
  RecursionGuard guard;
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.type != T::Float && b.type != T::Float) {
      int64_t x = a.type == T::Bool ? a.b : a.i, y = b.type == T::Bool ? b.b : b.i;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.type == T::String && b.type == T::String) {
    int c = a.s->compare(*b.s);  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.type == T::List && b.type == T::List && a.list->kind == b.list->kind &&
      a.list->kind != ListObj::Kind::Iterator) {
    const auto &x = a.list->items, &y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (py_equal(x[k], y[k])) continue;
      return py_compare(x[k], y[k], line);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined())
    fail(ErrorKind::InvalidArgument, "chat template line ", line, ": ",
         a.is_undefined() && a.hint ? *a.hint : (b.hint ? *b.hint : std::string("value is undefined")));
  fail(ErrorKind::InvalidArgument, "chat template line ", line, ": cannot compare '", type_name(a), "' with '",
       type_name(b), "'");
}

std::string type_name(const Value& v) {
  switch (v.type) {
    case Value::Type::Undefined: return "Undefined";
    case Value::Type::None: return "NoneType";
    case Value::Type::Bool: return "bool";
    case Value::Type::Int: return "int";
    case Value::Type::Float: return "float";
    case Value::Type::String: return "str";
    case Value::Type::List:
      return v.list->kind == ListObj::Kind::Tuple ? "tuple"
                                                 : (v.list->kind == ListObj::Kind::List ? "list" : "generator");
    case Value::Type::Dict:
      return v.dict->kind == DictObj::Kind::Dict ? "dict"
                                                 : (v.dict->kind == DictObj::Kind::Loop ? "LoopContext" : "Namespace");
    case Value::Type::Function: return "function";
  }
  return "object";
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // like "-1.2345e+05"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  // Python's repr: positional when -4 <= exponent < 16, else scientific.
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
      out = digits + std::string(static_cast<size_t>(exp10 + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." + digits.substr(static_cast<size_t>(exp10 + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return neg ? "-" + out : out;
}

static bool py_isprintable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7f) return false;
  if (c < 0x7f) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return false;
    default: return true;
  }
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (py_isprintable(c)) {
      utf8_append(out, c);
    } else {
      if (c < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += quote;
  return out;
}

std::string py_repr(const Value& v) {
  RecursionGuard guard;
  switch (v.type) {
    case Value::Type::Undefined: return "Undefined";
    case Value::Type::String: return repr_string(*v.s);
    case Value::Type::List: {
      if (v.list->kind == ListObj::Kind::Iterator) return "<generator object>";
      bool tuple = v.list->kind == ListObj::Kind::Tuple;
      std::string out = tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->items.size(); ++k) {
        if (k) out += ", ";
        out += py_repr(v.list->items[k]);
      }
      if (tuple && v.list->items.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Type::Dict: {
      std::string out = v.dict->kind == DictObj::Kind::Namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, val] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(val);
      }
      return out + (v.dict->kind == DictObj::Kind::Namespace ? "}>" : "}");
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.type) {
    case Value::Type::Undefined: return "";
    case Value::Type::None: return "None";
    case Value::Type::Bool: return v.b ? "True" : "False";
    case Value::Type::Int: return std::to_string(v.i);
    case Value::Type::Float: return py_float_repr(v.f);
    case Value::Type::String: return *v.s;
    case Value::Type::Function: return "<function " + v.fn->name + ">";
    default: return py_repr(v);
  }
}

// ---- JSON -------------------------------------------------------------------

template <typename Json>
static Value from_json_at(const Json& j, uint32_t depth) {
  if (depth > kMaxValueDepth)
    fail(ErrorKind::InvalidArgument, "chat template input nested deeper than ", kMaxValueDepth, " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::floating(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list_of(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::new_dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        Value item = from_json_at(it.value(), depth + 1);
        d.dict->depth = std::max(d.dict->depth, value_depth(item) + 1);
        d.dict->items.emplace_back(Value::string(it.key()), std::move(item));
      }
      return d;
    }
    default: return Value::none();
  }
}

template <typename Json>
Value from_json(const Json& j) {
  return from_json_at(j, 1);
}
template Value from_json<nlohmann::json>(const nlohmann::json&);
template Value from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&);

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                          static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
    }
  }
  out += '"';
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int depth, int line) {
  if (depth > 512) fail(ErrorKind::InvalidArgument, "chat template line ", line, ": tojson: nesting too deep");
  auto newline = [&](int d) {
    out += '\n';
    for (int k = 0; k < d; ++k) out += o.indent;
  };
  switch (v.type) {
    case Value::Type::None: out += "null"; return;
    case Value::Type::Bool: out += v.b ? "true" : "false"; return;
    case Value::Type::Int: out += std::to_string(v.i); return;
    case Value::Type::Float: out += json_float(v.f); return;
    case Value::Type::String: json_string(out, *v.s, o.ensure_ascii); return;
    case Value::Type::List: {
      if (v.list->kind == ListObj::Kind::Iterator) break;
      const auto& items = v.list->items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += o.item_sep;
        if (o.has_indent) newline(depth + 1);
        dump(out, items[k], o, depth + 1, line);
      }
      if (o.has_indent) newline(depth);
      out += ']';
      return;
    }
    case Value::Type::Dict: {
      if (v.dict->kind != DictObj::Kind::Dict) break;
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict->items) {
        std::string key;
        switch (k.type) {
          case Value::Type::String: key = *k.s; break;
          case Value::Type::Int: key = std::to_string(k.i); break;
          case Value::Type::Float: key = json_float(k.f); break;
          case Value::Type::Bool: key = k.b ? "true" : "false"; break;
          case Value::Type::None: key = "null"; break;
          default:
            fail(ErrorKind::InvalidArgument, "chat template line ", line, ": tojson: keys must be str, int, float, "
                 "bool or None, not ", type_name(k));
        }
        entries.emplace_back(std::move(key), &val);
      }
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += o.item_sep;
        if (o.has_indent) newline(depth + 1);
        json_string(out, entries[k].first, o.ensure_ascii);
        out += o.key_sep;
        dump(out, *entries[k].second, o, depth + 1, line);
      }
      if (o.has_indent) newline(depth);
      out += '}';
      return;
    }
    default: break;
  }
  fail(ErrorKind::InvalidArgument, "chat template line ", line, ": tojson: Object of type ", type_name(v),
       " is not JSON serializable");
}

std::string to_json(const Value& v, const JsonDumpOptions& opt, int line) {
  std::string out;
  dump(out, v, opt, 0, line);
  return out;
}

// ---- UTF-8 --------------------------------------------------------------------

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t k = 0;
  while (k < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && k + static_cast<size_t>(len) <= s.size();
    for (int m = 1; ok && m < len; ++m) {
      unsigned char cc = static_cast<unsigned char>(s[k + static_cast<size_t>(m)]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {  // invalid byte: keep it as U+FFFD so nothing downstream breaks
      out.push_back(0xfffd);
      ++k;
      continue;
    }
    out.push_back(cp);
    k += static_cast<size_t>(len);
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  return n;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

}  // namespace ingot::tmpl
