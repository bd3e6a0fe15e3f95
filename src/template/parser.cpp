// Recursive-descent parser with jinja2's grammar and operator precedence.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "template/ast.h"
#include "template/builtins.h"
#include "template/lexer.h"
#include "util/error.h"

namespace ingot::tmpl {

namespace {

constexpr int kMaxNesting = 200;
constexpr int kMaxExprDepth = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  std::unique_ptr<Template> run() {
    auto tpl = std::make_unique<Template>();
    tpl->body = subparse({});
    return tpl;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return t_[p_]; }
  const Token& look() const { return t_[p_ + 1 < t_.size() ? p_ + 1 : p_]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "'}}'";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "'%}'";
      case Tok::Eof: return "end of template";
      case Tok::String: return "string literal";
      default: return "'" + t.value + "'";
    }
  }
  [[noreturn]] void error(const std::string& msg) const {
    fail(ErrorKind::BadFormat, "chat template syntax error at line ", cur().line, ": ", msg);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) error("expected a name, got " + describe(cur()));
    std::string v = cur().value;
    next();
    return v;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) error("expected end of statement '%}', got " + describe(cur()));
    next();
  }
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.error("template is nested too deeply");
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };
  // Records the subtree height of a finished node (children are sealed first).
  ExprPtr seal(ExprPtr e) {
    int d = 0;
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get()})
      if (c) d = std::max(d, c->depth);
    for (const auto& x : e->args) d = std::max(d, x->depth);
    for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) error("expression is nested too deeply");
    return e;
  }
  ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements
  // Parses until a block whose first name is in `ends` (left current) or EOF.
  Body subparse(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          error("unexpected end of template, expected " + want);
        }
        return body;
      }
      if (tk.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Data;
        s->line = tk.line;
        s->text = tk.value;
        body.push_back(std::move(s));
        next();
      } else if (tk.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = tk.line;
        s->expr = parse_tuple(false, true, {}, false);
        if (cur().type != Tok::VarEnd) error("expected end of print statement '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (tk.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name && ends.count(cur().value)) return body;
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(tk));
      }
    }
  }

  StmtPtr make_stmt(Stmt::Kind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  // Consumes `{% name %}` closing a block (current token is the name).
  void end_block() {
    next();
    expect_block_end();
  }

  StmtPtr parse_statement() {
    Nest nest(*this);
    if (cur().type != Tok::Name) error("expected a statement name, got " + describe(cur()));
    std::string tag = cur().value;
    int line = cur().line;
    next();
    if (tag == "for") return parse_for(line);
    if (tag == "if") return parse_if(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") {
      auto s = make_stmt(Stmt::Kind::FilterBlock, line);
      s->expr = parse_filter(nullptr, true);
      expect_block_end();
      s->body = subparse({"endfilter"});
      end_block();
      return s;
    }
    if (tag == "with") {
      auto s = make_stmt(Stmt::Kind::With, line);
      while (cur().type != Tok::BlockEnd) {
        if (!s->assigns.empty()) expect_op(",");
        Target target = parse_assign_target(false, {});
        expect_op("=");
        s->assigns.emplace_back(std::move(target), parse_expression(true));
      }
      expect_block_end();
      s->body = subparse({"endwith"});
      end_block();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop");
      expect_block_end();
      return make_stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    if (tag == "generation") {
      auto s = make_stmt(Stmt::Kind::Scope, line);
      expect_block_end();
      s->body = subparse({"endgeneration"});
      end_block();
      return s;
    }
    fail(ErrorKind::BadFormat, "chat template syntax error at line ", line, ": unknown tag '", tag, "'");
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(Stmt::Kind::For, line);
    s->target = parse_assign_target(true, {"in"});
    if (!skip_name("in")) error("expected 'in' in for loop, got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    s->recursive = skip_name("recursive");
    expect_block_end();
    ++loop_depth_;
    s->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (is_name("else")) {
      next();
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->else_body = subparse({"endfor"});
      loop_depth_ = saved;
    }
    end_block();
    return s;
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(Stmt::Kind::If, line);
    s->conds.push_back(parse_tuple(false, false, {}, false));
    expect_block_end();
    s->bodies.push_back(subparse({"elif", "else", "endif"}));
    while (true) {
      std::string which = cur().value;
      next();
      if (which == "elif") {
        s->conds.push_back(parse_tuple(false, false, {}, false));
        expect_block_end();
        s->bodies.push_back(subparse({"elif", "else", "endif"}));
      } else if (which == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
        end_block();
        break;
      } else {
        expect_block_end();
        break;
      }
    }
    return s;
  }

  StmtPtr parse_set(int line) {
    Target target;
    if (cur().type == Tok::Name && look().type == Tok::Op && look().value == ".") {
      target.name = expect_name();
      next();
      target.attr = expect_name();
    } else {
      target = parse_assign_target(true, {});
    }
    if (skip_op("=")) {
      auto s = make_stmt(Stmt::Kind::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      expect_block_end();
      return s;
    }
    auto s = make_stmt(Stmt::Kind::SetBlock, line);
    if (target.is_tuple) error("a block assignment needs a single name");
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect_block_end();
    s->body = subparse({"endset"});
    end_block();
    return s;
  }

  std::vector<MacroParam> parse_signature() {
    std::vector<MacroParam> params;
    expect_op("(");
    bool seen_default = false;
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam param;
      param.name = expect_name();
      if (skip_op("=")) {
        param.default_value = parse_expression(true);
        seen_default = true;
      } else if (seen_default) {
        error("non-default argument follows default argument");
      }
      params.push_back(std::move(param));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(Stmt::Kind::Macro, line);
    s->name = expect_name();
    s->params = parse_signature();
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = subparse({"endmacro"});
    loop_depth_ = saved;
    end_block();
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(Stmt::Kind::CallBlock, line);
    if (is_op("(")) s->params = parse_signature();
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) error("expected a call after 'call'");
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = subparse({"endcall"});
    loop_depth_ = saved;
    end_block();
    return s;
  }

  Target to_target(const Expr& e) {
    Target t;
    if (e.kind == Expr::Kind::Name) {
      t.name = e.name;
    } else if (e.kind == Expr::Kind::Tuple) {
      t.is_tuple = true;
      for (const auto& item : e.args) t.items.push_back(to_target(*item));
    } else {
      error("cannot assign to this expression");
    }
    return t;
  }

  Target parse_assign_target(bool with_tuple, const std::set<std::string>& extra_end) {
    ExprPtr e = with_tuple ? parse_tuple(true, false, extra_end, false) : parse_primary();
    return to_target(*e);
  }

  // ---- expressions
  bool tuple_end(const std::set<std::string>& extra_end) const {
    const Token& tk = cur();
    if (tk.type == Tok::VarEnd || tk.type == Tok::BlockEnd || tk.type == Tok::Eof) return true;
    if (tk.type == Tok::Op && tk.value == ")") return true;
    return tk.type == Tok::Name && extra_end.count(tk.value);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::set<std::string>& extra_end,
                      bool explicit_parens) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      if (simplified) args.push_back(parse_primary());
      else args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) error("expected an expression, got " + describe(cur()));
    }
    auto e = node(Expr::Kind::Tuple, line);
    e->args = std::move(args);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    Nest nest(*this);
    ExprPtr expr1 = parse_or();
    while (is_name("if")) {
      int line = cur().line;
      next();
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (skip_name("else")) other = parse_condexpr();
      auto e = node(Expr::Kind::CondExpr, line);
      e->a = std::move(expr1);
      e->b = std::move(cond);
      e->c = std::move(other);
      expr1 = seal(std::move(e));
    }
    return expr1;
  }

  ExprPtr binary(Expr::Kind k, ExprPtr a, ExprPtr b, int line, std::string op = "") {
    auto e = node(k, line);
    e->a = std::move(a);
    e->b = std::move(b);
    e->name = std::move(op);
    return seal(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      left = binary(Expr::Kind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      left = binary(Expr::Kind::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      int line = cur().line;
      next();
      auto e = node(Expr::Kind::Not, line);
      e->a = parse_not();
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> args;
    std::vector<std::string> ops;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::Op && (tk.value == "==" || tk.value == "!=" || tk.value == "<" || tk.value == ">" ||
                                 tk.value == "<=" || tk.value == ">=")) {
        ops.push_back(tk.value);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && look().type == Tok::Name && look().value == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      args.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(Expr::Kind::Compare, line);
    e->args.push_back(std::move(first));
    for (auto& a : args) e->args.push_back(std::move(a));
    e->ops = std::move(ops);
    return seal(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().value;
      int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_concat(), line, op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = node(Expr::Kind::Concat, line);
    e->args.push_back(std::move(first));
    while (skip_op("~")) e->args.push_back(parse_math2());
    return seal(std::move(e));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().value;
      int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_pow(), line, op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      left = binary(Expr::Kind::Binary, std::move(left), parse_unary(true), line, "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      bool neg = is_op("-");
      next();
      e = node(neg ? Expr::Kind::Neg : Expr::Kind::Pos, line);
      e->a = parse_unary(false);
      e = seal(std::move(e));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    Nest nest(*this);
    const Token& tk = cur();
    int line = tk.line;
    if (tk.type == Tok::Name) {
      const std::string& v = tk.value;
      auto lit = node(Expr::Kind::Literal, line);
      if (v == "true" || v == "True") lit->value = Value::boolean(true);
      else if (v == "false" || v == "False") lit->value = Value::boolean(false);
      else if (v == "none" || v == "None") lit->value = Value::none();
      else {
        auto n = node(Expr::Kind::Name, line);
        n->name = v;
        next();
        return n;
      }
      next();
      return lit;
    }
    if (tk.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().value;
        next();
      }
      auto lit = node(Expr::Kind::Literal, line);
      lit->value = Value::string(std::move(s));
      return lit;
    }
    if (tk.type == Tok::Integer || tk.type == Tok::Float) {
      auto lit = node(Expr::Kind::Literal, line);
      errno = 0;
      if (tk.type == Tok::Integer) {
        long long v = std::strtoll(tk.value.c_str(), nullptr, 10);
        if (errno == ERANGE) error("integer literal out of range: " + tk.value);
        lit->value = Value::integer(v);
      } else {
        lit->value = Value::floating(std::strtod(tk.value.c_str(), nullptr));
      }
      next();
      return lit;
    }
    if (tk.type == Tok::Op && tk.value == "(") {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (tk.type == Tok::Op && tk.value == "[") {
      next();
      auto e = node(Expr::Kind::List, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return seal(std::move(e));
    }
    if (tk.type == Tok::Op && tk.value == "{") {
      next();
      auto e = node(Expr::Kind::Dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return seal(std::move(e));
    }
    error("unexpected " + describe(tk));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        e = seal(parse_subscript(std::move(e)));
      } else if (is_op("(")) {
        e = seal(parse_call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) e = parse_filter(std::move(e), false);
      else if (is_name("is")) e = seal(parse_test(std::move(e)));
      else if (is_op("(")) e = seal(parse_call(std::move(e)));
      else return e;
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::Name) {
        auto e = node(Expr::Kind::Getattr, line);
        e->a = std::move(target);
        e->name = cur().value;
        next();
        return e;
      }
      if (cur().type != Tok::Integer) error("expected a name or number after '.', got " + describe(cur()));
      auto e = node(Expr::Kind::Getitem, line);
      e->a = std::move(target);
      e->b = node(Expr::Kind::Literal, line);
      e->b->value = Value::integer(std::strtoll(cur().value.c_str(), nullptr, 10));
      next();
      return e;
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) error("expected a subscript");
    auto e = node(Expr::Kind::Getitem, line);
    e->a = std::move(target);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = node(Expr::Kind::Tuple, line);
      e->b->args = std::move(args);
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!skip_op(":")) {
      ExprPtr e = parse_expression(true);
      if (!skip_op(":")) return e;
      start = std::move(e);
    }
    auto s = node(Expr::Kind::Slice, line);
    s->a = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) s->b = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->c = parse_expression(true);
    }
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && look().type == Tok::Op && look().value == "=") {
        std::string key = cur().value;
        next();
        next();
        e.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error("positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(Expr::Kind::Call, cur().line);
    e->a = std::move(callee);
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr input, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      int line = cur().line;
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      auto e = node(Expr::Kind::Filter, line);
      e->a = std::move(input);
      e->name = name;
      if (is_op("(")) parse_call_args(*e);
      input = seal(std::move(e));
    }
    return input;
  }

  ExprPtr parse_test(ExprPtr value) {
    int line = cur().line;
    next();  // 'is'
    bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    auto e = node(Expr::Kind::Test, line);
    e->a = std::move(value);
    e->name = name;
    const Token& tk = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((tk.type == Tok::Name || tk.type == Tok::String || tk.type == Tok::Integer ||
                tk.type == Tok::Float || (tk.type == Tok::Op && (tk.value == "[" || tk.value == "{"))) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("you cannot chain multiple tests with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = node(Expr::Kind::Not, line);
    n->a = std::move(e);
    return n;
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::unique_ptr<Template> parse_template(const std::string& source) {
  auto tpl = Parser(lex(source)).run();
  check_names(*tpl);
  analyze_scopes(*tpl);
  return tpl;
}

}  // namespace ingot::tmpl
