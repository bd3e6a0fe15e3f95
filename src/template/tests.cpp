// jinja2's built-in tests (`x is defined`, `x is string`, ...).
#include <map>

#include "template/builtins.h"
#include "template/interpreter.h"

namespace ingot::tmpl {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& test_arg(Interpreter& in, CallArgs& a, const char* test) {
  if (a.pos.empty()) in.error(a.line, "test '", test, "' needs an argument");
  return a.pos[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.type == Value::Type::Bool; }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.type == Value::Type::Bool && v.b; }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.type == Value::Type::Bool && !v.b; }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.type == Value::Type::Int; }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.type == Value::Type::Float; }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_mapping(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || (v.is_list() && v.list->kind != ListObj::Kind::Iterator) ||
         v.is_mapping();
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) {
  return v.type == Value::Type::Function || v.is_undefined() || (v.is_dict() && v.dict->call);
}
bool t_eq(Interpreter& in, const Value& v, CallArgs& a) { return py_equal(v, test_arg(in, a, "eq")); }
bool t_ne(Interpreter& in, const Value& v, CallArgs& a) { return !py_equal(v, test_arg(in, a, "ne")); }
bool t_lt(Interpreter& in, const Value& v, CallArgs& a) { return py_compare(v, test_arg(in, a, "lt"), a.line) < 0; }
bool t_le(Interpreter& in, const Value& v, CallArgs& a) { return py_compare(v, test_arg(in, a, "le"), a.line) <= 0; }
bool t_gt(Interpreter& in, const Value& v, CallArgs& a) { return py_compare(v, test_arg(in, a, "gt"), a.line) > 0; }
bool t_ge(Interpreter& in, const Value& v, CallArgs& a) { return py_compare(v, test_arg(in, a, "ge"), a.line) >= 0; }
bool t_in(Interpreter& in, const Value& v, CallArgs& a) {
  const Value& c = test_arg(in, a, "in");
  if (c.is_string()) return v.is_string() && c.str().find(v.str()) != std::string::npos;
  for (const auto& x : in.iterate(c, a.line))
    if (py_equal(x, v)) return true;
  return false;
}
int64_t int_for_test(Interpreter& in, const Value& v, int line) {
  if (v.type == Value::Type::Int || v.type == Value::Type::Bool) return v.type == Value::Type::Bool ? v.b : v.i;
  if (v.type == Value::Type::Float) return static_cast<int64_t>(v.f);
  in.error(line, "test needs a number, not ", type_name(v));
}
bool t_even(Interpreter& in, const Value& v, CallArgs& a) { return int_for_test(in, v, a.line) % 2 == 0; }
bool t_odd(Interpreter& in, const Value& v, CallArgs& a) { return int_for_test(in, v, a.line) % 2 != 0; }
bool t_divisibleby(Interpreter& in, const Value& v, CallArgs& a) {
  int64_t d = int_for_test(in, test_arg(in, a, "divisibleby"), a.line);
  if (d == 0) in.error(a.line, "integer division or modulo by zero");
  return int_for_test(in, v, a.line) % d == 0;
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v);
  return py_lower(s) == s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v);
  return py_upper(s) == s;
}
bool t_sameas(Interpreter& in, const Value& v, CallArgs& a) {
  const Value& o = test_arg(in, a, "sameas");
  if (v.type != o.type) return false;
  switch (v.type) {
    case Value::Type::None:
    case Value::Type::Undefined: return true;
    case Value::Type::Bool: return v.b == o.b;
    case Value::Type::List: return v.list == o.list;
    case Value::Type::Dict: return v.dict == o.dict;
    case Value::Type::Function: return v.fn == o.fn;
    default: return py_equal(v, o);
  }
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.str()); }

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> m = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none},       {"boolean", t_boolean},
      {"true", t_true},       {"false", t_false},         {"integer", t_integer}, {"float", t_float},
      {"number", t_number},   {"string", t_string},       {"mapping", t_mapping}, {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable}, {"eq", t_eq},           {"equalto", t_eq},
      {"==", t_eq},           {"ne", t_ne},               {"!=", t_ne},           {"lt", t_lt},
      {"lessthan", t_lt},     {"<", t_lt},                {"le", t_le},           {"<=", t_le},
      {"gt", t_gt},           {"greaterthan", t_gt},      {">", t_gt},            {"ge", t_ge},
      {">=", t_ge},           {"in", t_in},               {"even", t_even},       {"odd", t_odd},
      {"divisibleby", t_divisibleby}, {"lower", t_lower}, {"upper", t_upper},     {"sameas", t_sameas},
      {"escaped", t_escaped}, {"filter", t_filter},       {"test", t_test},
  };
  return m;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(Interpreter& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) in.error(args.line, "no test named '", name, "'");
  return it->second(in, input, args);
}

}  // namespace ingot::tmpl
