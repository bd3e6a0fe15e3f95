// Python's str / list / dict methods as the immutable sandbox exposes them,
// the template globals, and the string helpers the filters share.
#include <utf8proc.h>

#include <chrono>
#include <ctime>

#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"

namespace ingot::tmpl {

// ---- string helpers ----------------------------------------------------------

std::string to_str_arg(Interpreter& in, const Value& v, int line, const char* what) {
  if (!v.is_string()) in.error(line, what, " must be str, not ", type_name(v));
  return v.str();
}

int64_t to_int_arg(Interpreter& in, const Value& v, int line, const char* what) {
  if (v.type == Value::Type::Int) return v.i;
  if (v.type == Value::Type::Bool) return v.b;
  in.error(line, what, " must be an integer, not ", type_name(v));
}

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = utf8_decode(s);
  std::vector<char32_t> set;
  bool ws = !chars || chars->is_none() || chars->is_undefined();
  if (!ws) set = utf8_decode(chars->is_string() ? chars->str() : py_str(*chars));
  auto strip_it = [&](char32_t c) {
    return ws ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return utf8_encode(std::vector<char32_t>(cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(e)));
}

static char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
static char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
static char32_t to_title(char32_t c) {
  if (c < 0x80) return to_upper(c);
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}
static bool is_cased(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
static bool is_alpha(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
static bool is_decimal(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND; }
static bool is_numeric(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

template <typename F>
static std::string map_cps(const std::string& s, F f) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}

std::string py_lower(const std::string& s) { return map_cps(s, to_lower); }
std::string py_upper(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xdf) out += "SS";  // the one full case mapping templates meet (German sharp s)
    else utf8_append(out, to_upper(c));
  }
  return out;
}

static std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, prev_cased ? to_lower(c) : to_title(c));
    prev_cased = is_cased(c);
  }
  return out;
}

static std::string py_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, first ? to_title(c) : to_lower(c));
    first = false;
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = utf8_decode(s);
    int64_t done = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (k < cps.size()) utf8_append(out, cps[k]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s) {
  std::vector<std::string> lines;
  auto cps = utf8_decode(s);
  std::vector<char32_t> cur;
  for (size_t k = 0; k < cps.size(); ++k) {
    char32_t c = cps[k];
    bool br = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
              c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!br) {
      cur.push_back(c);
      continue;
    }
    if (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') ++k;
    lines.push_back(utf8_encode(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(utf8_encode(cur));
  return lines;
}

Value py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right, int line,
               Interpreter& in) {
  std::vector<Value> parts;
  if (!sep || sep->is_none()) {
    auto cps = utf8_decode(s);
    std::vector<std::string> words;
    if (!from_right) {
      size_t k = 0;
      int64_t splits = 0;
      while (k < cps.size()) {
        while (k < cps.size() && py_isspace(cps[k])) ++k;
        if (k >= cps.size()) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          size_t e = cps.size();
          while (e > k && py_isspace(cps[e - 1])) --e;
          words.push_back(utf8_encode({cps.begin() + static_cast<long>(k), cps.begin() + static_cast<long>(e)}));
          break;
        }
        size_t b = k;
        while (k < cps.size() && !py_isspace(cps[k])) ++k;
        words.push_back(utf8_encode({cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(k)}));
        ++splits;
      }
    } else {
      size_t k = cps.size();
      int64_t splits = 0;
      while (k > 0) {
        while (k > 0 && py_isspace(cps[k - 1])) --k;
        if (k == 0) break;
        if (maxsplit >= 0 && splits >= maxsplit) {
          size_t b = 0;
          while (b < k && py_isspace(cps[b])) ++b;
          words.push_back(utf8_encode({cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(k)}));
          break;
        }
        size_t e = k;
        while (k > 0 && !py_isspace(cps[k - 1])) --k;
        words.push_back(utf8_encode({cps.begin() + static_cast<long>(k), cps.begin() + static_cast<long>(e)}));
        ++splits;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) parts.push_back(Value::string(std::move(w)));
    return Value::list_of(std::move(parts));
  }
  std::string d = to_str_arg(in, *sep, line, "separator");
  if (d.empty()) in.error(line, "empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t pos = 0;
    int64_t splits = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      size_t hit = s.find(d, pos);
      if (hit == std::string::npos) break;
      pieces.push_back(s.substr(pos, hit - pos));
      pos = hit + d.size();
      ++splits;
    }
    pieces.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t splits = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      if (end < d.size()) break;
      size_t hit = s.rfind(d, end - d.size());
      if (hit == std::string::npos) break;
      pieces.push_back(s.substr(hit + d.size(), end - hit - d.size()));
      end = hit;
      ++splits;
    }
    pieces.push_back(s.substr(0, end));
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  return Value::list_of(std::move(parts));
}

// ---- methods -------------------------------------------------------------------

namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs&);

int64_t opt_int(Interpreter& in, const CallArgs& a, size_t i, const char* name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  return to_int_arg(in, *v, a.line, name);
}

bool affix_match(Interpreter& in, const std::string& s, const Value& arg, bool suffix, int line) {
  std::vector<Value> options;
  if (arg.is_list() && arg.list->kind == ListObj::Kind::Tuple) options = arg.list->items;
  else options.push_back(arg);
  for (const auto& o : options) {
    std::string x = to_str_arg(in, o, line, suffix ? "endswith argument" : "startswith argument");
    if (x.size() > s.size()) continue;
    if (suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0) return true;
  }
  return false;
}

template <bool (*Pred)(char32_t)>
Value str_is(const std::string& s) {
  auto cps = utf8_decode(s);
  if (cps.empty()) return Value::boolean(false);
  for (char32_t c : cps)
    if (!Pred(c)) return Value::boolean(false);
  return Value::boolean(true);
}
bool alnum(char32_t c) { return is_alpha(c) || is_numeric(c); }
bool space(char32_t c) { return py_isspace(c); }

Value case_test(const std::string& s, bool want_upper) {
  bool any = false;
  for (char32_t c : utf8_decode(s)) {
    if (!is_cased(c)) continue;
    bool up = to_lower(c) != c || (to_upper(c) == c && utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LU);
    if (up != want_upper) return Value::boolean(false);
    any = true;
  }
  return Value::boolean(any);
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_pos)));
}

Value str_method(Interpreter& in, const std::string& name, const std::string& s, CallArgs& a) {
  int line = a.line;
  const Value* a0 = a.get(0, "");
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value::string(py_strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
  if (name == "split" || name == "rsplit")
    return py_split(s, a.get(0, "sep"), opt_int(in, a, 1, "maxsplit", -1), name == "rsplit", line, in);
  if (name == "splitlines") {
    std::vector<Value> out;
    for (auto& l : py_splitlines(s)) out.push_back(Value::string(std::move(l)));
    return Value::list_of(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    if (!a0) in.error(line, name, "() takes at least 1 argument");
    std::string sub = s;
    if (const Value* st = a.get(1, "start"); st && !st->is_none()) {
      auto cps = utf8_decode(s);
      int64_t n = static_cast<int64_t>(cps.size()), b = to_int_arg(in, *st, line, "start");
      if (b < 0) b = std::max<int64_t>(0, b + n);
      sub = b >= n ? "" : utf8_encode({cps.begin() + b, cps.end()});
    }
    return Value::boolean(affix_match(in, sub, *a0, name == "endswith", line));
  }
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "swapcase")
    return Value::string(map_cps(s, [](char32_t c) { return to_lower(c) != c ? to_lower(c) : to_upper(c); }));
  if (name == "replace") {
    if (a.pos.size() < 2) in.error(line, "replace() takes at least 2 arguments");
    return Value::string(py_replace(s, to_str_arg(in, a.pos[0], line, "replace() argument 1"),
                                    to_str_arg(in, a.pos[1], line, "replace() argument 2"),
                                    opt_int(in, a, 2, "count", -1)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (!a0) in.error(line, name, "() takes at least 1 argument");
    std::string sub = to_str_arg(in, *a0, line, "substring");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") in.error(line, "substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, p));
  }
  if (name == "join") {
    if (!a0) in.error(line, "join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const auto& v : in.iterate(*a0, line)) {
      if (!v.is_string()) in.error(line, "sequence item: expected str instance, ", type_name(v), " found");
      if (!first) out += s;
      out += v.str();
      first = false;
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(brace_format(in, s, a, line));
  if (name == "isdigit" || name == "isnumeric") return str_is<is_numeric>(s);
  if (name == "isdecimal") return str_is<is_decimal>(s);
  if (name == "isalpha") return str_is<is_alpha>(s);
  if (name == "isalnum") return str_is<alnum>(s);
  if (name == "isspace") return str_is<space>(s);
  if (name == "isupper") return case_test(s, true);
  if (name == "islower") return case_test(s, false);
  if (name == "removeprefix" || name == "removesuffix") {
    if (!a0) in.error(line, name, "() takes exactly one argument");
    std::string x = to_str_arg(in, *a0, line, name.c_str());
    bool pre = name == "removeprefix";
    if (x.size() <= s.size() && (pre ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return Value::string(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    if (!a0) in.error(line, name, "() takes exactly one argument");
    std::string sep = to_str_arg(in, *a0, line, "separator");
    if (sep.empty()) in.error(line, "empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return name == "partition" ? Value::tuple_of({Value::string(s), Value::string(""), Value::string("")})
                                 : Value::tuple_of({Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple_of({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))});
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    int64_t width = a0 ? to_int_arg(in, *a0, line, "width") : 0;
    std::string fill = " ";
    if (const Value* f = a.get(1, "fillchar")) fill = to_str_arg(in, *f, line, "fillchar");
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value::string(s);
    if (width > 1'000'000) in.error(line, "width too large");
    int64_t total = width - len;
    auto rep = [&](int64_t n, const std::string& c) {
      std::string o;
      for (int64_t k = 0; k < n; ++k) o += c;
      return o;
    };
    if (name == "zfill") {
      bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      return Value::string(sign ? s.substr(0, 1) + rep(total, "0") + s.substr(1) : rep(total, "0") + s);
    }
    if (name == "ljust") return Value::string(s + rep(total, fill));
    if (name == "rjust") return Value::string(rep(total, fill) + s);
    int64_t left = total / 2 + (total & width & 1);
    return Value::string(rep(left, fill) + s + rep(total - left, fill));
  }
  in.error(line, "str has no method ", name);
}

const char* const kStrMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "casefold", "title", "capitalize", "swapcase", "replace", "find", "rfind", "index", "rindex", "count", "join",
    "format", "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "isupper", "islower",
    "removeprefix", "removesuffix", "partition", "rpartition", "zfill", "center", "ljust", "rjust"};
const char* const kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
const char* const kDictUnsafe[] = {"pop", "popitem", "setdefault", "update", "clear"};

template <size_t N>
bool in_list(const char* const (&names)[N], const std::string& name) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value items_of(const Value& d) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict->items) out.push_back(Value::tuple_of({k, v}));
  return Value::list_of(std::move(out));
}

}  // namespace

Value get_method(Interpreter& in, const Value& obj, const std::string& name, int line) {
  (void)in;
  (void)line;
  auto bind = [&](auto fn) { return Value::function(name, fn); };
  if (obj.is_string()) {
    if (!in_list(kStrMethods, name)) return Value::undefined();
    std::string self = obj.str();
    return bind([self, name](Interpreter& i, CallArgs& a) { return str_method(i, name, self, a); });
  }
  if (obj.is_list() && obj.list->kind != ListObj::Kind::Iterator) {
    const char* tname = obj.list->kind == ListObj::Kind::Tuple ? "tuple" : "list";
    if (in_list(kListUnsafe, name) && obj.list->kind == ListObj::Kind::List)
      return Value::undefined("access to attribute '" + name + "' of '" + tname + "' object is unsafe.");
    if (name != "index" && name != "count" && !(name == "copy" && obj.list->kind == ListObj::Kind::List))
      return Value::undefined();
    Value self = obj;
    return bind([self, name](Interpreter& i, CallArgs& a) {
      if (name == "copy") return Value::list_of(self.list->items);
      if (a.pos.empty()) i.error(a.line, name, "() takes exactly one argument");
      int64_t count = 0;
      for (size_t k = 0; k < self.list->items.size(); ++k)
        if (py_equal(self.list->items[k], a.pos[0])) {
          if (name == "index") return Value::integer(static_cast<int64_t>(k));
          ++count;
        }
      if (name == "index") i.error(a.line, py_repr(a.pos[0]), " is not in list");
      return Value::integer(count);
    });
  }
  if (obj.is_mapping()) {
    if (in_list(kDictUnsafe, name))
      return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
    Value self = obj;
    if (name == "items") return bind([self](Interpreter&, CallArgs&) { return items_of(self); });
    if (name == "keys" || name == "values")
      return bind([self, name](Interpreter&, CallArgs&) {
        std::vector<Value> out;
        for (const auto& [k, v] : self.dict->items) out.push_back(name == "keys" ? k : v);
        return Value::list_of(std::move(out));
      });
    if (name == "get")
      return bind([self](Interpreter& i, CallArgs& a) {
        if (a.pos.empty()) i.error(a.line, "get expected at least 1 argument");
        const Value* v = self.dict->find(a.pos[0]);
        if (v) return *v;
        return a.pos.size() > 1 ? a.pos[1] : Value::none();
      });
    if (name == "copy")
      return bind([self](Interpreter&, CallArgs&) {
        Value d = Value::new_dict();
        d.dict->items = self.dict->items;
        return d;
      });
  }
  return Value::undefined();
}

// ---- globals -------------------------------------------------------------------

void add_globals(Value& g) {
  DictObj& d = *g.dict;
  d.set("raise_exception", Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    std::string msg = a.pos.empty() ? "" : py_str(a.pos[0]);
    fail(ErrorKind::InvalidArgument, "chat template raised an exception: ", msg);
  }));
  d.set("strftime_now", Value::function("strftime_now", [](Interpreter& in, CallArgs& a) {
    if (a.pos.empty()) in.error(a.line, "strftime_now() takes a format argument");
    std::string fmt = to_str_arg(in, a.pos[0], a.line, "format");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    if (fmt.empty()) return Value::string("");
    std::vector<char> buf(fmt.size() * 16 + 256);
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    return Value::string(std::string(buf.data(), n));
  }));
  d.set("range", Value::function("range", [](Interpreter& in, CallArgs& a) {
    if (a.pos.empty() || a.pos.size() > 3) in.error(a.line, "range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = to_int_arg(in, a.pos[0], a.line, "range() argument");
    } else {
      start = to_int_arg(in, a.pos[0], a.line, "range() argument");
      stop = to_int_arg(in, a.pos[1], a.line, "range() argument");
      if (a.pos.size() == 3) step = to_int_arg(in, a.pos[2], a.line, "range() argument");
    }
    if (step == 0) in.error(a.line, "range() arg 3 must not be zero");
    __int128 count = step > 0 ? (stop > start ? ((__int128)stop - start + step - 1) / step : 0)
                              : (start > stop ? ((__int128)start - stop - step - 1) / -step : 0);
    if (count > 100000) in.error(a.line, "range too big: the sandbox blocks ranges larger than 100000");
    std::vector<Value> out;
    for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) out.push_back(Value::integer(start + k * step));
    return Value::list_of(std::move(out));
  }));
  auto make_dict = [](Interpreter& in, CallArgs& a, DictObj::Kind kind) {
    Value out = Value::new_dict();
    out.dict->kind = kind;
    if (!a.pos.empty()) {
      if (a.pos.size() > 1) in.error(a.line, "expected at most 1 positional argument");
      if (a.pos[0].is_mapping()) {
        out.dict->items = a.pos[0].dict->items;
      } else {
        for (const auto& pair : in.iterate(a.pos[0], a.line)) {
          auto kv = in.iterate(pair, a.line);
          if (kv.size() != 2) in.error(a.line, "dictionary update sequence element has wrong length");
          out.dict->set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : a.kw) out.dict->set(k, v);
    return out;
  };
  d.set("dict", Value::function("dict", [make_dict](Interpreter& in, CallArgs& a) {
    return make_dict(in, a, DictObj::Kind::Dict);
  }));
  d.set("namespace", Value::function("namespace", [make_dict](Interpreter& in, CallArgs& a) {
    Value ns = make_dict(in, a, DictObj::Kind::Namespace);
    in.track_namespace(ns);
    return ns;
  }));
  d.set("joiner", Value::function("joiner", [](Interpreter&, CallArgs& a) {
    std::string sep = a.pos.empty() ? ", " : py_str(a.pos[0]);
    auto used = std::make_shared<bool>(false);
    return Value::function("joiner", [sep, used](Interpreter&, CallArgs&) {
      if (!*used) {
        *used = true;
        return Value::string("");
      }
      return Value::string(sep);
    });
  }));
}

}  // namespace ingot::tmpl
