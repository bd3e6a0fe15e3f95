#include "template/interpreter.h"

#include <cmath>

#include "template/builtins.h"
#include "template/format.h"

namespace ingot::tmpl {

Value* Frame::find(const std::string& name) {
  for (Frame* f = this; f; f = f->parent.get())
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

Interpreter::Interpreter(const Template& tpl, Limits limits) : tpl_(tpl), limits_(limits) {}

Interpreter::~Interpreter() {
  for (auto& f : closures_) f->vars.clear();
  for (auto& d : namespaces_) d->items.clear();
}

std::string Interpreter::render(const Value& context) {
  Value globals = Value::new_dict();
  add_globals(globals);
  auto root = std::make_shared<Frame>();
  for (auto& [k, v] : globals.dict->items) root->vars.emplace_back(k.str(), v);
  frame_ = std::make_shared<Frame>();
  frame_->parent = root;
  if (context.is_dict())
    for (const auto& [k, v] : context.dict->items)
      if (k.is_string()) frame_->set(k.str(), v);
  preset_locals(tpl_.root_locals);
  std::string out;
  out_ = &out;
  exec_body(tpl_.body);
  out_ = nullptr;
  return out;
}

void Interpreter::charge(uint64_t steps, int line) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) error(line, "template exceeded its work budget (", limits_.max_steps, " steps)");
}

void Interpreter::emit(const std::string& text, int line) {
  charge(1, line);
  if (out_->size() + text.size() > limits_.max_output_bytes)
    error(line, "template output exceeds ", limits_.max_output_bytes, " bytes");
  out_->append(text);
}

[[noreturn]] void Interpreter::undefined_error(const Value& v, int line) {
  error(line, v.hint ? *v.hint : std::string("value is undefined"));
}

std::string Interpreter::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  if (saved->size() + buf.size() > limits_.max_output_bytes)
    error(0, "template output exceeds ", limits_.max_output_bytes, " bytes");
  return buf;
}

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {
// Restores the current frame when a scope ends, also on errors.
struct FrameScope {
  FrameScope(std::shared_ptr<Frame>& slot, std::shared_ptr<Frame> next) : slot_(slot), saved_(slot) {
    slot_ = std::move(next);
  }
  ~FrameScope() { slot_ = saved_; }
  std::shared_ptr<Frame>& slot_;
  std::shared_ptr<Frame> saved_;
};
std::shared_ptr<Frame> child_of(const std::shared_ptr<Frame>& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}
}  // namespace

void Interpreter::preset_locals(const std::vector<std::string>& names) {
  for (const auto& n : names) frame_->set(n, Value::undefined("'" + n + "' is undefined"));
}

Value Interpreter::make_macro(const Stmt& s) {
  std::shared_ptr<Frame> closure = frame_;
  closures_.push_back(closure);
  const Stmt* def = &s;
  return Value::function(s.name, [def, closure](Interpreter& in, CallArgs& args) {
    if (++in.call_depth_ > in.limits_.max_call_depth) {
      --in.call_depth_;
      in.error(args.line, "macro calls nested deeper than ", in.limits_.max_call_depth);
    }
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{in.call_depth_};
    FrameScope scope(in.frame_, child_of(closure));
    in.preset_locals(def->body_locals);
    std::vector<bool> used_kw(args.kw.size(), false);
    for (size_t k = 0; k < def->params.size(); ++k) {
      const MacroParam& p = def->params[k];
      const Value* v = k < args.pos.size() ? &args.pos[k] : nullptr;
      for (size_t m = 0; !v && m < args.kw.size(); ++m)
        if (args.kw[m].first == p.name) {
          v = &args.kw[m].second;
          used_kw[m] = true;
        }
      if (v) in.frame_->set(p.name, *v);
      else if (p.default_value) in.frame_->set(p.name, in.eval(*p.default_value));
      else in.frame_->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
    }
    std::vector<Value> varargs;
    for (size_t k = def->params.size(); k < args.pos.size(); ++k) varargs.push_back(args.pos[k]);
    Value kwargs = Value::new_dict();
    for (size_t m = 0; m < args.kw.size(); ++m) {
      if (used_kw[m]) continue;
      if (args.kw[m].first == "caller") in.frame_->set("caller", args.kw[m].second);
      else kwargs.dict->set(args.kw[m].first, args.kw[m].second);
    }
    in.frame_->set("varargs", Value::tuple_of(std::move(varargs)));
    in.frame_->set("kwargs", kwargs);
    return Value::string(in.capture(def->body));
  });
}

void Interpreter::assign(const Target& t, const Value& v, int line) {
  if (!t.is_tuple) {
    frame_->set(t.name, v);
    return;
  }
  if (v.is_undefined()) undefined_error(v, line);
  std::vector<Value> items = iterate(v, line);
  if (items.size() != t.items.size())
    error(line, items.size() < t.items.size() ? "not enough" : "too many", " values to unpack (expected ",
          t.items.size(), ", got ", items.size(), ")");
  for (size_t k = 0; k < items.size(); ++k) assign(t.items[k], items[k], line);
}

Value Interpreter::eval_filter(const Expr& e, Value input) {
  if (e.a) input = eval(*e.a);  // chained filters: the inner filter is e.a
  CallArgs args;
  args.line = e.line;
  for (const auto& a : e.args) args.pos.push_back(eval(*a));
  for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
  charge(1, e.line);
  return apply_filter(*this, e.name, input, args);
}

// Filter-block chains are parsed with a null innermost input; this feeds `text` into it.
static Value run_filter_chain(Interpreter& in, const Expr& e, const Value& text) {
  Value input = e.a ? run_filter_chain(in, *e.a, text) : text;
  CallArgs args;
  args.line = e.line;
  for (const auto& a : e.args) args.pos.push_back(in.eval(*a));
  for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, in.eval(*a));
  return apply_filter(in, e.name, input, args);
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  switch (s.kind) {
    case Stmt::Kind::Data: emit(s.text, s.line); return Flow::Normal;
    case Stmt::Kind::Print: {
      Value v = eval(*s.expr);
      emit(py_str(v), s.line);
      return Flow::Normal;
    }
    case Stmt::Kind::If:
      for (size_t k = 0; k < s.conds.size(); ++k)
        if (truthy(eval(*s.conds[k]))) return exec_body(s.bodies[k]);
      return exec_body(s.else_body);
    case Stmt::Kind::For: exec_for(s, eval(*s.expr), 0); return Flow::Normal;
    case Stmt::Kind::Set: {
      Value v = eval(*s.expr);
      if (!s.target.attr.empty()) {
        Value* ns = frame_->find(s.target.name);
        if (!ns || !ns->is_dict() || ns->dict->kind != DictObj::Kind::Namespace)
          error(s.line, "cannot assign attribute on non-namespace object '", s.target.name, "'");
        ns->dict->set(s.target.attr, std::move(v));
      } else {
        assign(s.target, v, s.line);
      }
      return Flow::Normal;
    }
    case Stmt::Kind::SetBlock: {
      Value v = Value::string(capture(s.body));
      if (s.expr) v = run_filter_chain(*this, *s.expr, v);
      if (!s.target.attr.empty()) {
        Value* ns = frame_->find(s.target.name);
        if (!ns || !ns->is_dict() || ns->dict->kind != DictObj::Kind::Namespace)
          error(s.line, "cannot assign attribute on non-namespace object '", s.target.name, "'");
        ns->dict->set(s.target.attr, std::move(v));
      } else {
        assign(s.target, v, s.line);
      }
      return Flow::Normal;
    }
    case Stmt::Kind::Macro: frame_->set(s.name, make_macro(s)); return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.a);
      CallArgs args;
      args.line = s.line;
      for (const auto& a : call_expr.args) args.pos.push_back(eval(*a));
      for (const auto& [k, a] : call_expr.kwargs) args.kw.emplace_back(k, eval(*a));
      // The caller is a macro over the call block's body, closing over this scope.
      std::shared_ptr<Frame> closure = frame_;
      closures_.push_back(closure);
      const Stmt* body_owner = &s;
      Value caller = Value::function("caller", [closure, body_owner](Interpreter& in, CallArgs& a) {
        FrameScope scope(in.frame_, child_of(closure));
        in.preset_locals(body_owner->body_locals);
        for (size_t k = 0; k < body_owner->params.size(); ++k) {
          const MacroParam& p = body_owner->params[k];
          const Value* v = k < a.pos.size() ? &a.pos[k] : a.get(SIZE_MAX, p.name);
          if (v) in.frame_->set(p.name, *v);
          else if (p.default_value) in.frame_->set(p.name, in.eval(*p.default_value));
          else in.frame_->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
        }
        return Value::string(in.capture(body_owner->body));
      });
      args.kw.emplace_back("caller", caller);
      emit(py_str(call(callee, args, s.line)), s.line);
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      Value v = run_filter_chain(*this, *s.expr, Value::string(capture(s.body)));
      emit(py_str(v), s.line);
      return Flow::Normal;
    }
    case Stmt::Kind::With: {
      FrameScope scope(frame_, child_of(frame_));
      preset_locals(s.body_locals);
      for (const auto& [t, e] : s.assigns) assign(t, eval(*e), s.line);
      return exec_body(s.body);
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::Scope: {  // {% generation %} is a call block: its own frame
      FrameScope scope(frame_, child_of(frame_));
      preset_locals(s.body_locals);
      return exec_body(s.body);
    }
  }
  return Flow::Normal;
}

void Interpreter::exec_for(const Stmt& s, const Value& iterable, int depth) {
  std::vector<Value> items = iterate(iterable, s.line);
  std::shared_ptr<Frame> outer = frame_;
  // Each iteration is a fresh frame: jinja2 re-resolves the body's names every time round.
  FrameScope scope(frame_, child_of(outer));
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      charge(1, s.line);
      frame_ = child_of(outer);
      assign(s.target, item, s.line);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    frame_ = child_of(outer);
    exec_body(s.else_body);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    charge(1, s.line);
    Value loop = Value::new_dict();
    DictObj& d = *loop.dict;
    d.kind = DictObj::Kind::Loop;
    d.set("index0", Value::integer(k));
    d.set("index", Value::integer(k + 1));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("revindex", Value::integer(n - k));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("depth0", Value::integer(depth));
    d.set("depth", Value::integer(depth + 1));
    d.set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)]
                            : Value::undefined("there is no previous item"));
    d.set("nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("there is no next item"));
    d.set("cycle", Value::function("cycle", [k](Interpreter& in, CallArgs& a) {
      if (a.pos.empty()) in.error(a.line, "no items for cycling given");
      return a.pos[static_cast<size_t>(k) % a.pos.size()];
    }));
    if (s.recursive) {
      const Stmt* def = &s;
      d.call = [def, outer, depth](Interpreter& in, CallArgs& a) {
        if (a.pos.size() != 1) in.error(a.line, "a recursive loop call takes exactly one argument");
        if (++in.call_depth_ > in.limits_.max_call_depth) {
          --in.call_depth_;
          in.error(a.line, "recursive loop nested deeper than ", in.limits_.max_call_depth);
        }
        std::string buf;
        std::string* saved = in.out_;
        in.out_ = &buf;
        FrameScope back(in.frame_, outer);
        try {
          in.exec_for(*def, a.pos[0], depth + 1);
        } catch (...) {
          in.out_ = saved;
          --in.call_depth_;
          throw;
        }
        in.out_ = saved;
        --in.call_depth_;
        return Value::string(std::move(buf));
      };
    }
    frame_ = child_of(outer);
    preset_locals(s.body_locals);
    frame_->set("loop", loop);
    assign(s.target, items[static_cast<size_t>(k)], s.line);
    if (exec_body(s.body) == Flow::Break) break;
  }
}

std::vector<Value> Interpreter::iterate(const Value& v, int line) {
  switch (v.type) {
    case Value::Type::Undefined: return {};
    case Value::Type::String: {
      std::vector<Value> out;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        utf8_append(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    }
    case Value::Type::List: return v.list->items;
    case Value::Type::Dict:
      if (v.dict->kind == DictObj::Kind::Dict) {
        std::vector<Value> keys;
        for (const auto& kv : v.dict->items) keys.push_back(kv.first);
        return keys;
      }
      break;
    default: break;
  }
  error(line, "'", type_name(v), "' object is not iterable");
}

Value Interpreter::call(const Value& callee, CallArgs& args, int line) {
  args.line = line;
  charge(1, line);
  if (callee.type == Value::Type::Function) return callee.fn->fn(*this, args);
  if (callee.is_dict() && callee.dict->call) return callee.dict->call(*this, args);
  if (callee.is_undefined()) undefined_error(callee, line);
  error(line, "'", type_name(callee), "' object is not callable");
}

static std::string object_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

Value Interpreter::getattr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (obj.is_dict()) {
    if (obj.dict->kind != DictObj::Kind::Dict) {
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
    }
    Value m = get_method(*this, obj, name, line);
    if (!m.is_undefined() || m.hint) return m;
    if (const Value* v = obj.dict->find(name)) return *v;
  } else if (obj.is_string() || obj.is_list()) {
    Value m = get_method(*this, obj, name, line);
    if (!m.is_undefined() || m.hint) return m;
  }
  return Value::undefined("'" + object_repr(obj) + "' has no attribute '" + name + "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  auto missing = [&]() {
    if (key.is_string()) return getattr(obj, key.str(), line);
    return Value::undefined("'" + object_repr(obj) + "' has no element " + py_repr(key));
  };
  bool int_key = key.type == Value::Type::Int || key.type == Value::Type::Bool;
  if ((obj.is_list() && obj.list->kind != ListObj::Kind::Iterator) || obj.is_string()) {
    if (!int_key) return missing();
    int64_t idx = key.type == Value::Type::Bool ? key.b : key.i;
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list->items.size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return missing();
      return obj.list->items[static_cast<size_t>(idx)];
    }
    auto cps = utf8_decode(obj.str());
    int64_t n = static_cast<int64_t>(cps.size());
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) return missing();
    std::string s;
    utf8_append(s, cps[static_cast<size_t>(idx)]);
    return Value::string(std::move(s));
  }
  if (obj.is_dict()) {
    if (obj.dict->kind == DictObj::Kind::Dict) {
      if (const Value* v = obj.dict->find(key)) return *v;
    } else if (key.is_string()) {
      if (const Value* v = obj.dict->find(key.str())) return *v;
    }
  }
  return missing();
}

Value Interpreter::slice(const Value& obj, const Expr& sl) {
  auto part = [&](const ExprPtr& e, bool& present) -> int64_t {
    present = false;
    if (!e) return 0;
    Value v = eval(*e);
    if (v.is_none()) return 0;
    if (v.type == Value::Type::Int) {
      present = true;
      return v.i;
    }
    if (v.type == Value::Type::Bool) {
      present = true;
      return v.b;
    }
    error(sl.line, "slice indices must be integers or None");
  };
  if (obj.is_undefined()) undefined_error(obj, sl.line);
  bool has_start, has_stop, has_step;
  int64_t start = part(sl.a, has_start), stop = part(sl.b, has_stop), step = part(sl.c, has_step);
  if (!has_step) step = 1;
  if (step == 0) error(sl.line, "slice step cannot be zero");
  std::vector<char32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = utf8_decode(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else if (obj.is_list() && obj.list->kind != ListObj::Kind::Iterator) {
    n = static_cast<int64_t>(obj.list->items.size());
  } else {
    return Value::undefined("'" + object_repr(obj) + "' cannot be sliced");
  }
  // Python's slice.indices().
  auto clamp = [&](int64_t v, bool present, int64_t dflt) {
    if (!present) return dflt;
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  start = clamp(start, has_start, step < 0 ? n - 1 : 0);
  stop = clamp(stop, has_stop, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) idx.push_back(k);
  if (obj.is_string()) {
    std::string s;
    for (int64_t k : idx) utf8_append(s, cps[static_cast<size_t>(k)]);
    return Value::string(std::move(s));
  }
  std::vector<Value> items;
  for (int64_t k : idx) items.push_back(obj.list->items[static_cast<size_t>(k)]);
  return obj.list->kind == ListObj::Kind::Tuple ? Value::tuple_of(std::move(items))
                                                : Value::list_of(std::move(items));
}

}  // namespace ingot::tmpl
