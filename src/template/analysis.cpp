// Checks jinja2 makes on a parsed template at compile time: unknown filter
// and test names, and its frame-local analysis, reproduced because it is
// observable: in each frame (the template root, a for-loop iteration, a macro or caller body) a
// name whose first reference in that frame's own statements is an
// unconditional assignment is a local that starts undefined. Loops and macros
// that run before the assignment then see it undefined, not the context's
// value (`{% for %}{{ v }}{% endfor %}{% set v = 1 %}` prints nothing for v).
// A name first read, or assigned only in some branches of an if, is resolved
// from the enclosing scope instead.
#include <map>

#include "template/ast.h"
#include "template/builtins.h"
#include "util/error.h"

namespace ingot::tmpl {

namespace {

enum class Ref { Resolve, Local };
using Refs = std::map<std::string, Ref>;

void load(Refs& refs, const std::string& name) { refs.emplace(name, Ref::Resolve); }
void store(Refs& refs, const std::string& name) { refs.emplace(name, Ref::Local); }

void load_expr(Refs& refs, const Expr* e) {
  if (!e) return;
  if (e->kind == Expr::Kind::Name) load(refs, e->name);
  load_expr(refs, e->a.get());
  load_expr(refs, e->b.get());
  load_expr(refs, e->c.get());
  for (const auto& x : e->args) load_expr(refs, x.get());
  for (const auto& kv : e->kwargs) load_expr(refs, kv.second.get());
}

void store_target(Refs& refs, const Target& t) {
  if (!t.attr.empty()) return load(refs, t.name);
  if (!t.is_tuple) return store(refs, t.name);
  for (const auto& item : t.items) store_target(refs, item);
}

void visit_body(Refs& refs, const Body& body);

void visit(Refs& refs, const Stmt& s) {
  switch (s.kind) {
    case Stmt::Kind::Print: load_expr(refs, s.expr.get()); break;
    case Stmt::Kind::Set:
      load_expr(refs, s.expr.get());
      store_target(refs, s.target);
      break;
    case Stmt::Kind::SetBlock: store_target(refs, s.target); break;
    case Stmt::Kind::If: {
      load_expr(refs, s.conds[0].get());
      // Three branches as jinja2 counts them: the body, all elifs, the else.
      Refs body = refs, elifs = refs, other = refs;
      visit_body(body, s.bodies[0]);
      for (size_t k = 1; k < s.conds.size(); ++k) {
        load_expr(elifs, s.conds[k].get());
        visit_body(elifs, s.bodies[k]);
      }
      visit_body(other, s.else_body);
      for (const Refs* branch : {&body, &elifs, &other})
        for (const auto& entry : *branch) {
          const auto& name = entry.first;  // named: clang 14 cannot capture a structured binding
          if (refs.count(name)) continue;
          auto local_in = [&](const Refs& r) {
            auto it = r.find(name);
            return it != r.end() && it->second == Ref::Local;
          };
          bool everywhere = local_in(body) && local_in(elifs) && local_in(other);
          refs[name] = everywhere ? Ref::Local : Ref::Resolve;
        }
      break;
    }
    case Stmt::Kind::For: load_expr(refs, s.expr.get()); break;
    case Stmt::Kind::Macro: store(refs, s.name); break;
    case Stmt::Kind::CallBlock:
    case Stmt::Kind::FilterBlock: load_expr(refs, s.expr.get()); break;
    case Stmt::Kind::With:
      for (const auto& a : s.assigns) load_expr(refs, a.second.get());
      break;
    default: break;
  }
}

void visit_body(Refs& refs, const Body& body) {
  for (const auto& s : body) visit(refs, *s);
}

std::vector<std::string> locals_of(const Body& body) {
  Refs refs;
  visit_body(refs, body);
  std::vector<std::string> out;
  for (const auto& [name, ref] : refs)
    if (ref == Ref::Local) out.push_back(name);
  return out;
}

void analyze_body(Body& body);

void analyze_stmt(Stmt& s) {
  switch (s.kind) {
    case Stmt::Kind::For:
    case Stmt::Kind::Macro:
    case Stmt::Kind::CallBlock:
    case Stmt::Kind::With:
    case Stmt::Kind::Scope: s.body_locals = locals_of(s.body); break;
    default: break;
  }
  for (auto& b : s.bodies) analyze_body(b);
  analyze_body(s.body);
  analyze_body(s.else_body);
}

void analyze_body(Body& body) {
  for (auto& s : body) analyze_stmt(*s);
}

// jinja2 rejects an unknown filter or test at compile time, except inside an
// {% if %} or a conditional expression, where it fails only when reached.
void check_expr_names(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == Expr::Kind::CondExpr) soft = true;
  if (!soft && e->kind == Expr::Kind::Filter && !has_filter(e->name))
    fail(ErrorKind::BadFormat, "chat template syntax error at line ", e->line, ": no filter named '", e->name, "'");
  if (!soft && e->kind == Expr::Kind::Test && !has_test(e->name))
    fail(ErrorKind::BadFormat, "chat template syntax error at line ", e->line, ": no test named '", e->name, "'");
  check_expr_names(e->a.get(), soft);
  check_expr_names(e->b.get(), soft);
  check_expr_names(e->c.get(), soft);
  for (const auto& x : e->args) check_expr_names(x.get(), soft);
  for (const auto& kv : e->kwargs) check_expr_names(kv.second.get(), soft);
}

void check_body_names(const Body& body, bool soft);

void check_stmt_names(const Stmt& s, bool soft) {
  if (s.kind == Stmt::Kind::If) soft = true;
  check_expr_names(s.expr.get(), soft);
  check_expr_names(s.cond.get(), soft);
  for (const auto& c : s.conds) check_expr_names(c.get(), soft);
  for (const auto& b : s.bodies) check_body_names(b, soft);
  for (const auto& p : s.params) check_expr_names(p.default_value.get(), soft);
  for (const auto& a : s.assigns) check_expr_names(a.second.get(), soft);
  check_body_names(s.body, soft);
  check_body_names(s.else_body, soft);
}

void check_body_names(const Body& body, bool soft) {
  for (const auto& s : body) check_stmt_names(*s, soft);
}


}  // namespace

void check_names(const Template& tpl) { check_body_names(tpl.body, false); }

void analyze_scopes(Template& tpl) {
  tpl.root_locals = locals_of(tpl.body);
  analyze_body(tpl.body);
}

}  // namespace ingot::tmpl
