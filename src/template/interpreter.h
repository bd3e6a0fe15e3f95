// Evaluates a parsed template against a context, with jinja2's scoping (a
// for loop or macro body is a scope of its own; if/else are not) and bounded
// work: output size, loop iterations and call depth are all capped, so a
// hostile template ends in an Error, never a hang or a stack overflow.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/value.h"
#include "util/error.h"

namespace ingot::tmpl {

struct Limits {
  size_t max_output_bytes = 64u << 20;
  uint64_t max_steps = 5'000'000;  // loop iterations + calls + output pieces
  int max_call_depth = 50;
};

struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;
  Value* find(const std::string& name);
  void set(const std::string& name, Value v);
};

class Interpreter {
 public:
  Interpreter(const Template& tpl, Limits limits = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  std::string render(const Value& context);
  // Namespaces can hold themselves; they are emptied when rendering ends so
  // that reference cycles are not leaked.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns.dict); }

  Value eval(const Expr& e);
  Value call(const Value& callee, CallArgs& args, int line);
  Value getattr(const Value& obj, const std::string& name, int line);
  Value getitem(const Value& obj, const Value& key, int line);
  // The elements a for loop (or list()) sees; a string gives its characters,
  // a dict its keys, Undefined nothing.
  std::vector<Value> iterate(const Value& v, int line);
  void charge(uint64_t steps, int line);
  // Starts the current frame's undefined-until-assigned locals (jinja2 scoping).
  void preset_locals(const std::vector<std::string>& names);

  template <typename... Args>
  [[noreturn]] void error(int line, Args&&... args) {
    fail(ErrorKind::InvalidArgument, "chat template line ", line, ": ", std::forward<Args>(args)...);
  }
  // Raises the UndefinedError that using `v` (an Undefined) means.
  [[noreturn]] void undefined_error(const Value& v, int line);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s, const Value& iterable, int depth);
  void assign(const Target& t, const Value& v, int line);
  Value make_macro(const Stmt& s);
  Value binary(const std::string& op, const Value& a, const Value& b, int line);
  Value compare(const Expr& e);
  Value slice(const Value& obj, const Expr& sl);
  std::string capture(const Body& body);
  void emit(const std::string& text, int line);
  Value eval_filter(const Expr& e, Value input);

  const Template& tpl_;
  Limits limits_;
  std::shared_ptr<Frame> frame_;
  std::string* out_ = nullptr;
  // Frames captured by macros: a frame holds its macro and the macro holds the
  // frame, so these are cleared when rendering ends.
  std::vector<std::shared_ptr<Frame>> closures_;
  std::vector<std::shared_ptr<DictObj>> namespaces_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace ingot::tmpl
