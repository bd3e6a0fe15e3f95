// The parsed template: expressions and statements as jinja2's parser builds
// them (same precedence, same statement set as transformers' environment,
// including the loop controls and the {% generation %} tag).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace ingot::tmpl {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // args
    Tuple,     // args
    Dict,      // args: key, value, key, value, ...
    Getattr,   // a . name
    Getitem,   // a [ b ]
    Slice,     // a [ args[0] : args[1] : args[2] ] (null parts allowed)
    Call,      // a ( args, kwargs )
    Filter,    // a | name ( args, kwargs ); a is null inside {% filter %}
    Test,      // a is name ( args, kwargs )
    Neg,       // - a
    Pos,       // + a
    Not,       // not a
    And,       // a and b
    Or,        // a or b
    Binary,    // a op b: + - * / // % **
    Concat,    // args joined with ~
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    CondExpr,  // a if b else c (c may be null)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // height of this subtree; bounded so evaluation cannot exhaust the stack
  Value value;
  std::string name;  // Name / Getattr / Filter / Test / Binary op
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

// Assignment target: a name, `ns.attr`, or a (nested) tuple of targets.
struct Target {
  std::string name;
  std::string attr;  // set for ns.attr
  std::vector<Target> items;
  bool is_tuple = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    Data,        // text
    Print,       // expr
    If,          // conds[k] -> bodies[k]; else_body
    For,         // target in expr [if cond] body else_body, recursive
    Set,         // target = expr
    SetBlock,    // target (name) = filter(body)
    Macro,       // name(params) body
    CallBlock,   // call expr with caller(params) = body
    FilterBlock, // filter chain over body
    With,        // assigns; body
    Break,
    Continue,
    Scope,       // body inline ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, cond;
  Target target;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  bool recursive = false;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<Target, ExprPtr>> assigns;
  // Names this statement's body frame assigns before ever reading them:
  // jinja2 makes them frame locals that start undefined (see analysis.cpp).
  std::vector<std::string> body_locals;
};

struct Template {
  Body body;
  std::vector<std::string> root_locals;
};

// Throws Error(BadFormat) for a filter or test jinja2 would reject at compile time.
void check_names(const Template& tpl);
// Fills Stmt::body_locals / Template::root_locals (jinja2's symbol analysis).
void analyze_scopes(Template& tpl);

// Throws Error(BadFormat) "chat template syntax error at line N: ...".
std::unique_ptr<Template> parse_template(const std::string& source);

}  // namespace ingot::tmpl
