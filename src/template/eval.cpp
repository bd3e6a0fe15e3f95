// Expression evaluation: Python's operator semantics on template values.
#include <cmath>

#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"

namespace ingot::tmpl {

namespace {

bool is_int_like(const Value& v) { return v.type == Value::Type::Int || v.type == Value::Type::Bool; }
int64_t int_of(const Value& v) { return v.type == Value::Type::Bool ? v.b : v.i; }

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b, int line) {
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  auto type_error = [&]() -> Value {
    error(line, "unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b), "'");
  };
  bool nums = a.is_number() && b.is_number();
  bool ints = is_int_like(a) && is_int_like(b);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(int_of(a), int_of(b), &r)) error(line, "integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > limits_.max_output_bytes) error(line, "string too long");
      if (a.safe || b.safe)  // Markup + str escapes the str
        return Value::markup((a.safe ? a.str() : html_escape(a.str())) + (b.safe ? b.str() : html_escape(b.str())));
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list->kind == b.list->kind && a.list->kind != ListObj::Kind::Iterator) {
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      charge(items.size(), line);
      return a.list->kind == ListObj::Kind::Tuple ? Value::tuple_of(std::move(items))
                                                  : Value::list_of(std::move(items));
    }
    return type_error();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(int_of(a), int_of(b), &r)) error(line, "integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.as_double() - b.as_double());
    return type_error();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(int_of(a), int_of(b), &r)) error(line, "integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.as_double() * b.as_double());
    const Value* seq = is_int_like(b) ? &a : (is_int_like(a) ? &b : nullptr);
    const Value* count = seq == &a ? &b : &a;
    if (seq && (seq->is_string() || (seq->is_list() && seq->list->kind != ListObj::Kind::Iterator))) {
      int64_t n = std::max<int64_t>(0, int_of(*count));
      size_t unit = seq->is_string() ? seq->str().size() : seq->list->items.size();
      if (unit && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit) error(line, "repetition too large");
      if (seq->is_string()) {
        std::string out;
        out.reserve(unit * static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) out += seq->str();
        return Value::string(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq->list->items.begin(), seq->list->items.end());
      charge(items.size(), line);
      return seq->list->kind == ListObj::Kind::Tuple ? Value::tuple_of(std::move(items))
                                                     : Value::list_of(std::move(items));
    }
    return type_error();
  }
  if (op == "/") {
    if (!nums) return type_error();
    if (b.as_double() == 0.0) error(line, "division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) return type_error();
    if (b.as_double() == 0.0) error(line, "integer division or modulo by zero");
    if (ints) {
      if (int_of(a) == INT64_MIN && int_of(b) == -1) error(line, "integer overflow");
      return Value::integer(floor_div(int_of(a), int_of(b)));
    }
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value::string(percent_format(*this, a.str(), b, line));
    if (!nums) return type_error();
    if (b.as_double() == 0.0) error(line, "integer division or modulo by zero");
    if (ints) {
      if (int_of(b) == -1) return Value::integer(0);
      return Value::integer(int_of(a) - floor_div(int_of(a), int_of(b)) * int_of(b));
    }
    double x = a.as_double(), y = b.as_double();
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  if (op == "**") {
    if (!nums) return type_error();
    if (ints && int_of(b) >= 0) {
      int64_t base = int_of(a), e = int_of(b), r = 1;
      while (e > 0) {
        if (e & 1)
          if (__builtin_mul_overflow(r, base, &r)) error(line, "integer overflow");
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base)) error(line, "integer overflow");
      }
      return Value::integer(r);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  error(line, "unknown operator ", op);
}

static bool contains(Interpreter& in, const Value& container, const Value& item, int line) {
  switch (container.type) {
    case Value::Type::Undefined: return false;
    case Value::Type::String:
      if (!item.is_string())
        in.error(line, "'in <string>' requires string as left operand, not ", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Type::List:
      for (const auto& v : container.list->items)
        if (py_equal(v, item)) return true;
      return false;
    case Value::Type::Dict:
      if (container.dict->kind == DictObj::Kind::Dict) return container.dict->find(item) != nullptr;
      break;
    default: break;
  }
  in.error(line, "argument of type '", type_name(container), "' is not iterable");
}

Value Interpreter::compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.args[k + 1]);
    const std::string& op = e.ops[k];
    bool r;
    if (op == "==") r = py_equal(left, right);
    else if (op == "!=") r = !py_equal(left, right);
    else if (op == "in") r = contains(*this, right, left, e.line);
    else if (op == "notin") r = !contains(*this, right, left, e.line);
    else {
      int c = py_compare(left, right, e.line);
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      if (Value* v = frame_->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return e.kind == Expr::Kind::List ? Value::list_of(std::move(items)) : Value::tuple_of(std::move(items));
    }
    case Expr::Kind::Dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (key.is_list() && key.list->kind != ListObj::Kind::Tuple) error(e.line, "unhashable type: 'list'");
        if (key.is_dict()) error(e.line, "unhashable type: 'dict'");
        d.dict->set(key, eval(*e.args[k + 1]));
      }
      return d;
    }
    case Expr::Kind::Getattr: return getattr(eval(*e.a), e.name, e.line);
    case Expr::Kind::Getitem: {
      Value obj = eval(*e.a);
      if (e.b->kind == Expr::Kind::Slice) return slice(obj, *e.b);
      return getitem(obj, eval(*e.b), e.line);
    }
    case Expr::Kind::Slice: error(e.line, "a slice is only valid inside []");
    case Expr::Kind::Call: {
      Value callee = eval(*e.a);
      CallArgs args;
      args.line = e.line;
      for (const auto& a : e.args) args.pos.push_back(eval(*a));
      for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
      return call(callee, args, e.line);
    }
    case Expr::Kind::Filter: return eval_filter(e, Value());
    case Expr::Kind::Test: {
      Value v = eval(*e.a);
      CallArgs args;
      args.line = e.line;
      for (const auto& a : e.args) args.pos.push_back(eval(*a));
      for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
      return Value::boolean(apply_test(*this, e.name, v, args));
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
      Value v = eval(*e.a);
      if (v.is_undefined()) undefined_error(v, e.line);
      if (!v.is_number()) error(e.line, "bad operand type for unary ", e.kind == Expr::Kind::Neg ? "-" : "+", ": '",
                                type_name(v), "'");
      if (e.kind == Expr::Kind::Pos) return is_int_like(v) ? Value::integer(int_of(v)) : v;
      if (is_int_like(v)) {
        if (int_of(v) == INT64_MIN) error(e.line, "integer overflow");
        return Value::integer(-int_of(v));
      }
      return Value::floating(-v.f);
    }
    case Expr::Kind::Not: return Value::boolean(!truthy(eval(*e.a)));
    case Expr::Kind::And: {
      Value l = eval(*e.a);
      return truthy(l) ? eval(*e.b) : l;
    }
    case Expr::Kind::Or: {
      Value l = eval(*e.a);
      return truthy(l) ? l : eval(*e.b);
    }
    case Expr::Kind::Binary: return binary(e.name, eval(*e.a), eval(*e.b), e.line);
    case Expr::Kind::Concat: {
      std::string out;
      for (const auto& a : e.args) {
        out += py_str(eval(*a));
        if (out.size() > limits_.max_output_bytes) error(e.line, "string too long");
      }
      return Value::string(std::move(out));
    }
    case Expr::Kind::Compare: return compare(e);
    case Expr::Kind::CondExpr:
      if (truthy(eval(*e.b))) return eval(*e.a);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  error(e.line, "unknown expression");
}

}  // namespace ingot::tmpl
