// jinja2's built-in filters (plus transformers' tojson).
#include <cmath>
#include <cstdio>
#include <map>

#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"

namespace ingot::tmpl {

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value* arg(const CallArgs& a, size_t i, const char* name) { return a.get(i, name); }
bool arg_bool(const CallArgs& a, size_t i, const char* name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : dflt;
}

std::string soft_str(const Value& v) { return py_str(v); }

std::vector<Value> seq(Interpreter& in, const Value& v, int line) { return in.iterate(v, line); }

// environment.getitem along a dotted path ("a.b", "a.0").
Value attr_path(Interpreter& in, Value v, const std::string& path, int line) {
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = in.getitem(v, digits ? Value::integer(std::stoll(part)) : Value::string(part), line);
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// Sort key: optional attribute(s), lower-cased strings unless case-sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value* attribute, bool case_sensitive, int line) {
  Value key = item;
  if (attribute && !attribute->is_none()) {
    if (attribute->is_string() && attribute->str().find(',') != std::string::npos) {
      std::vector<Value> parts;
      std::string attrs = attribute->str();
      size_t pos = 0;
      while (true) {
        size_t comma = attrs.find(',', pos);
        std::string one = attrs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        Value k = attr_path(in, item, one, line);
        if (!case_sensitive && k.is_string()) k = Value::string(py_lower(k.str()));
        parts.push_back(k);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      return Value::list_of(std::move(parts));
    }
    key = attribute->is_string() ? attr_path(in, item, attribute->str(), line) : in.getitem(item, *attribute, line);
  }
  if (!case_sensitive && key.is_string()) key = Value::string(py_lower(key.str()));
  return key;
}

void stable_sort_by(Interpreter& in, std::vector<Value>& items, std::vector<Value>& keys, bool reverse, int line) {
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    int c = py_compare(keys[x], keys[y], line);
    return reverse ? c > 0 : c < 0;
  });
  std::vector<Value> sorted;
  for (size_t k : order) sorted.push_back(items[k]);
  items = std::move(sorted);
  (void)in;
}

// Python int(str, base 10): whitespace, sign and underscores allowed.
bool parse_int(const std::string& raw, int64_t& out) {
  std::string s = py_strip(raw, nullptr, true, true);
  size_t k = 0;
  bool neg = false;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) neg = s[k++] == '-';
  if (k >= s.size()) return false;
  __int128 v = 0;
  bool prev_digit = false;
  for (; k < s.size(); ++k) {
    if (s[k] == '_' && prev_digit && k + 1 < s.size() && isdigit(static_cast<unsigned char>(s[k + 1]))) continue;
    if (!isdigit(static_cast<unsigned char>(s[k]))) return false;
    v = v * 10 + (s[k] - '0');
    if (v > ((__int128)INT64_MAX + 1)) return false;
    prev_digit = true;
  }
  if (!neg && v > INT64_MAX) return false;
  out = static_cast<int64_t>(neg ? -v : v);
  return true;
}

bool parse_float(const std::string& raw, double& out) {
  std::string s = py_strip(raw, nullptr, true, true);
  std::string t;
  for (char c : s)
    if (c != '_') t += c;
  if (t.empty()) return false;
  std::string low = py_lower(t);
  if (low == "nan" || low == "+nan" || low == "-nan") {
    out = NAN;
    return true;
  }
  if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") {
    out = INFINITY;
    return true;
  }
  if (low == "-inf" || low == "-infinity") {
    out = -INFINITY;
    return true;
  }
  if (low.find_first_not_of("0123456789+-.e") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end && *end == 0;
}

// ---- filters ---------------------------------------------------------------------

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  if (const Value* x = arg(a, 0, "ensure_ascii")) o.ensure_ascii = truthy(*x);
  if (const Value* x = arg(a, 1, "indent"); x && !x->is_none()) {
    o.has_indent = true;
    if (x->is_string()) o.indent = x->str();
    else o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(to_int_arg(in, *x, a.line, "indent"), 0, 64)), ' ');
    o.item_sep = ",";
  }
  if (const Value* x = arg(a, 2, "separators"); x && !x->is_none()) {
    auto parts = in.iterate(*x, a.line);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      in.error(a.line, "tojson: separators must be a pair of strings");
    o.item_sep = parts[0].str();
    o.key_sep = parts[1].str();
  }
  if (const Value* x = arg(a, 3, "sort_keys")) o.sort_keys = truthy(*x);
  return Value::string(to_json(v, o, a.line));
}

Value f_length(Interpreter& in, const Value& v, CallArgs& a) {
  switch (v.type) {
    case Value::Type::Undefined: return Value::integer(0);
    case Value::Type::String: return Value::integer(static_cast<int64_t>(utf8_length(v.str())));
    case Value::Type::List:
      if (v.list->kind == ListObj::Kind::Iterator) break;
      return Value::integer(static_cast<int64_t>(v.list->items.size()));
    case Value::Type::Dict:
      if (v.dict->kind != DictObj::Kind::Dict) break;
      return Value::integer(static_cast<int64_t>(v.dict->items.size()));
    default: break;
  }
  in.error(a.line, "object of type '", type_name(v), "' has no len()");
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  std::string sep = arg(a, 0, "d") ? soft_str(*arg(a, 0, "d")) : "";
  const Value* attribute = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& item : seq(in, v, a.line)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(attribute && !attribute->is_none() ? sort_key(in, item, attribute, true, a.line) : item);
  }
  return Value::string(std::move(out));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_first(Interpreter& in, const Value& v, CallArgs& a) {
  auto items = seq(in, v, a.line);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& in, const Value& v, CallArgs& a) {
  if (v.is_list() && v.list->kind == ListObj::Kind::Iterator) in.error(a.line, "'generator' object is not reversible");
  if (v.is_mapping()) in.error(a.line, "'dict' object is not reversible");
  auto items = seq(in, v, a.line);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Interpreter& in, const Value& v, CallArgs& a) { return Value::list_of(seq(in, v, a.line)); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::iterator_of({});  // jinja2 maps nothing over a false value
  const Value* attribute = nullptr;
  for (const auto& [k, x] : a.kw)
    if (k == "attribute") attribute = &x;
  if (attribute) {
    const Value* dflt = nullptr;
    for (const auto& [k, x] : a.kw)
      if (k == "default") dflt = &x;
    for (const auto& item : seq(in, v, a.line)) {
      Value r = attribute->is_string() ? attr_path(in, item, attribute->str(), a.line)
                                       : in.getitem(item, *attribute, a.line);
      if (r.is_undefined() && dflt) r = *dflt;
      out.push_back(r);
    }
    return Value::iterator_of(std::move(out));
  }
  if (a.pos.empty()) in.error(a.line, "map requires a filter argument");
  std::string name = to_str_arg(in, a.pos[0], a.line, "map filter name");
  if (!has_filter(name)) in.error(a.line, "no filter named '", name, "'");
  CallArgs rest;
  rest.line = a.line;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const auto& item : seq(in, v, a.line)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(in, name, item, copy));
  }
  return Value::iterator_of(std::move(out));
}

Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  size_t t = by_attr ? 1 : 0;
  std::string attribute;
  if (by_attr) {
    if (a.pos.empty()) in.error(a.line, "missing attribute argument");
    attribute = to_str_arg(in, a.pos[0], a.line, "attribute");
  }
  std::string test;
  if (a.pos.size() > t) test = to_str_arg(in, a.pos[t], a.line, "test name");
  if (!test.empty() && !has_test(test)) in.error(a.line, "no test named '", test, "'");
  CallArgs rest;
  rest.line = a.line;
  if (a.pos.size() > t + 1) rest.pos.assign(a.pos.begin() + static_cast<long>(t + 1), a.pos.end());
  rest.kw = a.kw;
  std::vector<Value> out;
  if (!truthy(v)) return Value::iterator_of({});  // jinja2 selects nothing from a false value
  for (const auto& item : seq(in, v, a.line)) {
    Value x = by_attr ? attr_path(in, item, attribute, a.line) : item;
    CallArgs copy = rest;
    bool r = test.empty() ? truthy(x) : apply_test(in, test, x, copy);
    if (r == keep) out.push_back(item);
  }
  return Value::iterator_of(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  if (a.pos.size() < 2) in.error(a.line, "replace needs old and new");
  int64_t count = -1;
  if (const Value* c = arg(a, 2, "count"); c && !c->is_none()) count = to_int_arg(in, *c, a.line, "count");
  return Value::string(py_replace(soft_str(v), soft_str(a.pos[0]), soft_str(a.pos[1]), count));
}

// Markup stays Markup through the str methods these filters call.
Value keep_markup(const Value& in, std::string s) { return in.safe ? Value::markup(std::move(s)) : Value::string(std::move(s)); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return keep_markup(v, py_lower(soft_str(v))); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return keep_markup(v, py_upper(soft_str(v))); }
Value f_capitalize(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs none;
  none.line = a.line;
  return get_method(in, Value::string(soft_str(v)), "capitalize", a.line).fn->fn(in, none);
}
Value f_title(Interpreter&, const Value& v, CallArgs&) {
  // jinja2's own title(): words start after whitespace, '-', '(', '{', '[' or '<'.
  std::string out;
  bool start = true;
  for (char32_t c : utf8_decode(soft_str(v))) {
    bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string one;
    utf8_append(one, c);
    out += sep ? one : (start ? py_upper(one) : py_lower(one));
    start = sep;
  }
  return Value::string(std::move(out));
}
Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  return keep_markup(v, py_strip(soft_str(v), arg(a, 0, "chars"), true, true));
}
Value f_string(Interpreter&, const Value& v, CallArgs&) { return keep_markup(v, soft_str(v)); }
Value f_safe(Interpreter&, const Value& v, CallArgs&) { return Value::markup(soft_str(v)); }
Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  return v.safe ? v : Value::markup(html_escape(soft_str(v)));
}
Value f_forceescape(Interpreter&, const Value& v, CallArgs&) { return Value::markup(html_escape(soft_str(v))); }

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  Value dflt = arg(a, 0, "default") ? *arg(a, 0, "default") : Value::integer(0);
  if (v.type == Value::Type::Int) return v;
  if (v.type == Value::Type::Bool) return Value::integer(v.b);
  if (v.type == Value::Type::Float) {
    if (!std::isfinite(v.f)) return dflt;
    return Value::integer(static_cast<int64_t>(v.f));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_int(v.str(), i)) return Value::integer(i);
    double d;
    if (parse_float(v.str(), d) && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  Value dflt = arg(a, 0, "default") ? *arg(a, 0, "default") : Value::floating(0.0);
  if (v.is_number()) return Value::floating(v.as_double());
  double d;
  if (v.is_string() && parse_float(v.str(), d)) return Value::floating(d);
  return dflt;
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  std::string ind = "    ";
  if (const Value* w = arg(a, 0, "width")) {
    if (w->is_string()) ind = w->str();
    else ind = std::string(static_cast<size_t>(std::clamp<int64_t>(to_int_arg(in, *w, a.line, "width"), 0, 1000)), ' ');
  }
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  std::vector<std::string> lines = py_splitlines(soft_str(v) + "\n");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
  }
  return Value::string(first ? ind + rv : rv);
}

Value f_items(Interpreter& in, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return Value::iterator_of({});
  if (!v.is_mapping()) in.error(a.line, "Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::tuple_of({k, x}));
  return Value::iterator_of(std::move(out));
}

Value f_dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.is_mapping()) in.error(a.line, "dictsort requires a mapping");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::string by = arg(a, 1, "by") ? soft_str(*arg(a, 1, "by")) : "key";
  if (by != "key" && by != "value") in.error(a.line, "You can only sort by either \"key\" or \"value\"");
  bool reverse = arg_bool(a, 2, "reverse", false);
  std::vector<Value> items, keys;
  for (const auto& [k, x] : v.dict->items) {
    items.push_back(Value::tuple_of({k, x}));
    Value key = by == "key" ? k : x;
    keys.push_back(!cs && key.is_string() ? Value::string(py_lower(key.str())) : key);
  }
  stable_sort_by(in, items, keys, reverse, a.line);
  return Value::list_of(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  bool reverse = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
  std::vector<Value> items = seq(in, v, a.line), keys;
  for (const auto& item : items) keys.push_back(sort_key(in, item, arg(a, 2, "attribute"), cs, a.line));
  stable_sort_by(in, items, keys, reverse, a.line);
  return Value::list_of(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::vector<Value> out, seen;
  for (const auto& item : seq(in, v, a.line)) {
    Value key = sort_key(in, item, arg(a, 1, "attribute"), cs, a.line);
    bool dup = false;
    for (const auto& s : seen)
      if (py_equal(s, key)) dup = true;
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::iterator_of(std::move(out));
}

Value minmax(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  auto items = seq(in, v, a.line);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(in, items[0], arg(a, 1, "attribute"), cs, a.line);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(in, items[k], arg(a, 1, "attribute"), cs, a.line);
    int c = py_compare(key, best_key, a.line);
    if (want_max ? c > 0 : c < 0) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return minmax(in, v, a, true); }

Value f_abs(Interpreter& in, const Value& v, CallArgs& a) {
  if (v.type == Value::Type::Float) return Value::floating(std::fabs(v.f));
  if (v.type == Value::Type::Int || v.type == Value::Type::Bool) {
    int64_t x = v.type == Value::Type::Bool ? v.b : v.i;
    if (x == INT64_MIN) in.error(a.line, "integer overflow");
    return Value::integer(x < 0 ? -x : x);
  }
  in.error(a.line, "bad operand type for abs(): '", type_name(v), "'");
}

Value f_round(Interpreter& in, const Value& v, CallArgs& a) {
  int64_t precision = arg(a, 0, "precision") ? to_int_arg(in, *arg(a, 0, "precision"), a.line, "precision") : 0;
  std::string method = arg(a, 1, "method") ? soft_str(*arg(a, 1, "method")) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    in.error(a.line, "method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) in.error(a.line, "round: a number is required, not ", type_name(v));
  if (method == "common" && v.type != Value::Type::Float) return Value::integer(v.type == Value::Type::Bool ? v.b : v.i);
  double x = v.as_double();
  if (method == "common") {
    if (precision < 0 || precision > 300 || !std::isfinite(x)) return Value::floating(x);
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);  // correctly rounded, half-even
    return Value::floating(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  return Value::floating((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  Value total = arg(a, 1, "start") ? *arg(a, 1, "start") : Value::integer(0);
  const Value* attribute = arg(a, 0, "attribute");
  for (const auto& item : seq(in, v, a.line)) {
    Value x = attribute && !attribute->is_none() ? sort_key(in, item, attribute, true, a.line) : item;
    CallArgs none;
    if (!total.is_number() || !x.is_number()) in.error(a.line, "sum: unsupported operand types");
    if (total.type == Value::Type::Float || x.type == Value::Type::Float)
      total = Value::floating(total.as_double() + x.as_double());
    else
      total = Value::integer((total.type == Value::Type::Bool ? total.b : total.i) + (x.type == Value::Type::Bool ? x.b : x.i));
  }
  return total;
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& a) {
  if (v.is_string()) {
    auto cps = utf8_decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  auto items = seq(in, v, a.line);
  std::reverse(items.begin(), items.end());
  return Value::iterator_of(std::move(items));
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  if (!arg(a, 0, "linecount")) in.error(a.line, "batch needs a line count");
  int64_t n = to_int_arg(in, *arg(a, 0, "linecount"), a.line, "linecount");
  if (n <= 0) in.error(a.line, "batch size must be positive");
  const Value* fill = arg(a, 1, "fill_with");
  std::vector<Value> out, cur;
  for (const auto& item : seq(in, v, a.line)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list_of(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list_of(std::move(cur)));
  }
  return Value::iterator_of(std::move(out));
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.kw.empty()) {
    Value d = Value::new_dict();
    for (const auto& [k, x] : a.kw) d.dict->set(k, x);
    return Value::string(percent_format(in, soft_str(v), d, a.line));
  }
  return Value::string(percent_format(in, soft_str(v), Value::tuple_of(a.pos), a.line));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs w;
  w.line = a.line;
  w.pos.push_back(arg(a, 0, "width") ? *arg(a, 0, "width") : Value::integer(80));
  return get_method(in, Value::string(soft_str(v)), "center", a.line).fn->fn(in, w);
}

Value f_wordcount(Interpreter& in, const Value& v, CallArgs& a) {
  return Value::integer(static_cast<int64_t>(py_split(soft_str(v), nullptr, -1, false, a.line, in).list->items.size()));
}

Value f_truncate(Interpreter& in, const Value& v, CallArgs& a) {
  std::string s = soft_str(v);
  int64_t length = arg(a, 0, "length") ? to_int_arg(in, *arg(a, 0, "length"), a.line, "length") : 255;
  bool killwords = arg_bool(a, 1, "killwords", false);
  std::string end = arg(a, 2, "end") ? soft_str(*arg(a, 2, "end")) : "...";
  int64_t leeway = arg(a, 3, "leeway") && !arg(a, 3, "leeway")->is_none()
                       ? to_int_arg(in, *arg(a, 3, "leeway"), a.line, "leeway") : 5;
  auto cps = utf8_decode(s);
  int64_t n = static_cast<int64_t>(cps.size()), end_len = static_cast<int64_t>(utf8_length(end));
  if (length < end_len || leeway < 0) in.error(a.line, "truncate: bad length or leeway");
  if (n <= length + leeway) return Value::string(s);
  std::string head = utf8_encode({cps.begin(), cps.begin() + (length - end_len)});
  if (killwords) return Value::string(head + end);
  size_t sp = head.rfind(' ');
  return Value::string((sp == std::string::npos ? head : head.substr(0, sp)) + end);
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  if (a.pos.empty()) in.error(a.line, "attr needs a name");
  std::string name = soft_str(a.pos[0]);
  if (v.is_dict() && v.dict->kind != DictObj::Kind::Dict) return in.getattr(v, name, a.line);
  Value m = get_method(in, v, name, a.line);
  return m.is_undefined() && !m.hint ? Value::undefined("'" + type_name(v) + " object' has no attribute '" + name + "'") : m;
}

Value f_pprint(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_repr(v)); }

Value f_unsupported(Interpreter& in, const Value&, CallArgs& a) {
  in.error(a.line, "this jinja2 filter is not supported by ingot's template engine");
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> m = {
      {"tojson", f_tojson},       {"length", f_length},     {"count", f_length},       {"join", f_join},
      {"default", f_default},     {"d", f_default},         {"first", f_first},        {"last", f_last},
      {"list", f_list},           {"map", f_map},           {"select", f_select},      {"reject", f_reject},
      {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"lower", f_lower},
      {"upper", f_upper},         {"capitalize", f_capitalize}, {"title", f_title},    {"trim", f_trim},
      {"string", f_string},       {"safe", f_safe},         {"escape", f_escape},      {"e", f_escape},
      {"forceescape", f_forceescape},  {"int", f_int},           {"float", f_float},        {"indent", f_indent},
      {"items", f_items},         {"dictsort", f_dictsort}, {"sort", f_sort},          {"unique", f_unique},
      {"min", f_min},             {"max", f_max},           {"abs", f_abs},            {"round", f_round},
      {"sum", f_sum},             {"reverse", f_reverse},   {"batch", f_batch},        {"format", f_format},
      {"center", f_center},       {"wordcount", f_wordcount}, {"truncate", f_truncate}, {"attr", f_attr},
      {"pprint", f_pprint},       {"groupby", f_unsupported}, {"slice", f_unsupported}, {"striptags", f_unsupported},
      {"urlencode", f_unsupported}, {"urlize", f_unsupported}, {"wordwrap", f_unsupported},
      {"xmlattr", f_unsupported}, {"filesizeformat", f_unsupported}, {"random", f_unsupported},
  };
  return m;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) in.error(args.line, "no filter named '", name, "'");
  return it->second(in, input, args);
}

}  // namespace ingot::tmpl
