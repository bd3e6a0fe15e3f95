// The runtime value of the template interpreter: Python's object model as far
// as chat templates can observe it (int vs float vs bool, ordered dicts,
// tuples, one-shot iterators, Jinja's Undefined), so that printing,
// comparison and tojson come out exactly as they do under jinja2.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ingot::tmpl {

struct Value;
struct ListObj;
struct DictObj;
struct CallArgs;
class Interpreter;

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct FunctionObj {
  std::string name;
  NativeFn fn;
};

struct Value {
  enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function };
  Type type = Type::Undefined;
  bool b = false;
  bool safe = false;  // String only: markupsafe's Markup (from |safe, |escape)
  int64_t i = 0;
  double f = 0.0;
  std::shared_ptr<const std::string> s;    // String
  std::shared_ptr<ListObj> list;           // List (also tuple / iterator)
  std::shared_ptr<DictObj> dict;           // Dict (also namespace / loop)
  std::shared_ptr<FunctionObj> fn;         // Function
  // Undefined only: what was missing, for the error raised when it is used.
  std::shared_ptr<const std::string> hint;

  static Value undefined(std::string hint = "");
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value markup(std::string v);  // a Markup string: `+` escapes the other side
  static Value list_of(std::vector<Value> items);
  static Value tuple_of(std::vector<Value> items);
  static Value iterator_of(std::vector<Value> items);  // a Python generator: always true, no len()
  static Value new_dict();
  static Value function(std::string name, NativeFn fn);

  bool is_undefined() const { return type == Type::Undefined; }
  bool is_none() const { return type == Type::None; }
  bool is_string() const { return type == Type::String; }
  bool is_number() const { return type == Type::Int || type == Type::Float || type == Type::Bool; }
  bool is_list() const { return type == Type::List; }
  bool is_dict() const { return type == Type::Dict; }
  bool is_mapping() const;  // a plain dict (not a namespace or loop object)
  const std::string& str() const { return *s; }
  double as_double() const { return type == Type::Float ? f : static_cast<double>(type == Type::Bool ? b : i); }
};

// Containers deeper than this are refused: printing, comparing and freeing
// them recurse, and a template must not be able to overflow the stack.
constexpr uint32_t kMaxValueDepth = 1000;

struct ListObj {
  enum class Kind : uint8_t { List, Tuple, Iterator };
  Kind kind = Kind::List;
  uint32_t depth = 1;
  std::vector<Value> items;
};
uint32_t value_depth(const Value& v);

struct DictObj {
  enum class Kind : uint8_t { Dict, Namespace, Loop };
  Kind kind = Kind::Dict;
  uint32_t depth = 1;
  std::vector<std::pair<Value, Value>> items;  // insertion order, like Python's dict
  // A recursive loop object is callable: loop(children).
  NativeFn call;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
  void set(std::string_view key, Value v) { set(Value::string(std::string(key)), std::move(v)); }
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  int line = 0;
  // Named-or-positional parameter lookup: the index-th positional, else the keyword.
  const Value* get(size_t index, std::string_view name) const;
};

// Python semantics.
bool truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
// <0, 0, >0; throws (with `line`) when Python would raise TypeError.
int py_compare(const Value& a, const Value& b, int line);
std::string py_str(const Value& v);   // str(v); Undefined is ""
std::string py_repr(const Value& v);  // repr(v)
std::string py_float_repr(double d);
std::string html_escape(const std::string& s);  // markupsafe.escape
std::string type_name(const Value& v);  // "str", "int", "dict", ...

// JSON in and out (json.dumps with transformers' tojson defaults).
template <typename Json>
Value from_json(const Json& j);
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_indent = false;
  std::string indent;
  std::string item_sep = ", ", key_sep = ": ";
};
std::string to_json(const Value& v, const JsonDumpOptions& opt, int line);

// UTF-8 helpers (code points).
std::vector<char32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<char32_t>& cps);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
bool py_isspace(char32_t c);

extern template Value from_json<nlohmann::json>(const nlohmann::json&);
extern template Value from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&);

}  // namespace ingot::tmpl
