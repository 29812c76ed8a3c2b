#include "chat/jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "chat/jinja/error.h"

namespace clover::chat::jinja {

namespace {

using TT = Token::Type;
using EK = Expr::Kind;
using SK = Stmt::Kind;

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks

class Parser {
 public:
  Parser(const std::vector<Token>& t, const std::string& src) : t_(t), src_(src) {}

  Body parse_template() {
    Body body;
    std::string end = subparse(body, {});
    if (!end.empty()) fail_at(prev_pos_, "Encountered unknown tag '" + end + "'.");
    return body;
  }

 private:
  const std::vector<Token>& t_;
  const std::string& src_;
  size_t i_ = 0;
  size_t prev_pos_ = 0;
  int depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& p_) : p(p_) {
      if (++p.depth_ > kMaxDepth) p.fail("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- token stream ----
  const Token& cur() const { return t_[i_]; }
  const Token& look(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() { if (i_ + 1 < t_.size()) ++i_; }
  bool is_op(const char* op) const { return cur().type == TT::Operator && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TT::Name && cur().text == n; }
  bool skip_op(const char* op) { if (is_op(op)) { next(); return true; } return false; }
  bool skip_name(const char* n) { if (is_name(n)) { next(); return true; } return false; }

  [[noreturn]] void fail_at(size_t pos, const std::string& msg) const {
    int line, col;
    line_column(src_, pos, line, col);
    throw TemplateError(msg, line, col);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(cur().pos, msg); }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case TT::Data: return "template data";
      case TT::VarBegin: return "begin of print statement";
      case TT::VarEnd: return "end of print statement";
      case TT::BlockBegin: return "begin of statement block";
      case TT::BlockEnd: return "end of statement block";
      case TT::End: return "end of template";
      case TT::String: return "string";
      case TT::Integer: return "integer";
      case TT::Float: return "float";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected token '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TT::Name) fail("expected name, got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect(TT type, const char* what) {
    if (cur().type != type) fail(std::string("expected token '") + what + "', got " + describe(cur()));
    next();
  }

  static ExprPtr make(EK k, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }
  static StmtPtr make_stmt(SK k, size_t pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->pos = pos;
    return s;
  }

  // ---- statements ----

  // Parses into `body` until a block tag named in `ends`; consumes that name and returns it
  // ("" at the end of the template).
  std::string subparse(Body& body, std::initializer_list<std::string_view> ends) {
    DepthGuard g(*this);
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case TT::End:
          if (ends.size()) fail_at(t.pos, "Unexpected end of template. Jinja was looking for the following tags: " +
                                              join_ends(ends) + ".");
          return "";
        case TT::Data: {
          auto s = make_stmt(SK::Text, t.pos);
          s->text = t.text;
          body.push_back(std::move(s));
          next();
          break;
        }
        case TT::VarBegin: {
          next();
          auto s = make_stmt(SK::Print, t.pos);
          s->expr = parse_tuple(true, {});
          expect(TT::VarEnd, "end of print statement");
          body.push_back(std::move(s));
          break;
        }
        case TT::BlockBegin: {
          prev_pos_ = t.pos;
          next();
          if (cur().type == TT::Name) {
            for (auto e : ends)
              if (cur().text == e) {
                std::string name = cur().text;
                next();
                return name;
              }
          }
          body.push_back(parse_statement());
          expect(TT::BlockEnd, "end of statement block");
          break;
        }
        default:
          fail("unexpected " + describe(t));
      }
    }
  }

  static std::string join_ends(std::initializer_list<std::string_view> ends) {
    std::string s;
    for (auto e : ends) s += (s.empty() ? "'" : ", '") + std::string(e) + "'";
    return s;
  }

  // Expects the %} of the current tag, then the body up to one of `ends`.
  std::string block_body(Body& body, std::initializer_list<std::string_view> ends) {
    expect(TT::BlockEnd, "end of statement block");
    return subparse(body, ends);
  }

  StmtPtr parse_statement() {
    if (cur().type != TT::Name) fail("tag name expected");
    size_t pos = cur().pos;
    std::string tag = cur().text;
    next();
    if (tag == "if") return parse_if(pos);
    if (tag == "for") return parse_for(pos);
    if (tag == "set") return parse_set(pos);
    if (tag == "macro") return parse_macro(pos);
    if (tag == "call") return parse_call_block(pos);
    if (tag == "filter") {
      auto s = make_stmt(SK::FilterBlock, pos);
      s->expr = parse_filter(nullptr, true);
      block_body(s->body, {"endfilter"});
      return s;
    }
    if (tag == "with") {
      auto s = make_stmt(SK::With, pos);
      while (cur().type != TT::BlockEnd) {
        if (!s->params.empty()) expect_op(",");
        MacroParam p;
        p.name = expect_name();
        expect_op("=");
        p.default_value = parse_expression(true);
        s->params.push_back(std::move(p));
      }
      block_body(s->body, {"endwith"});
      return s;
    }
    if (tag == "generation") {  // HF's AssistantTracker: renders its body unchanged
      auto s = make_stmt(SK::Scope, pos);
      block_body(s->body, {"endgeneration"});
      return s;
    }
    if (tag == "print") {
      auto s = make_stmt(SK::Print, pos);
      s->expr = parse_tuple(true, {});
      return s;
    }
    if (tag == "break") return make_stmt(SK::Break, pos);
    if (tag == "continue") return make_stmt(SK::Continue, pos);
    static const char* unsupported[] = {"block", "extends", "include", "import", "from", "autoescape",
                                        "do", "trans", "pluralize", "raw"};
    for (const char* u : unsupported)
      if (tag == u) fail_at(pos, "unsupported tag '" + tag + "' (not used by chat templates)");
    fail_at(pos, "Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_if(size_t pos) {
    auto s = make_stmt(SK::If, pos);
    ExprPtr cond = parse_tuple(false, {});
    while (true) {
      Body body;
      std::string end = block_body(body, {"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "elif") { cond = parse_tuple(false, {}); continue; }
      if (end == "else") block_body(s->else_body, {"endif"});
      return s;
    }
  }

  StmtPtr parse_for(size_t pos) {
    auto s = make_stmt(SK::For, pos);
    s->target = parse_assign_target("in");
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, "recursive");
    if (skip_name("if")) s->cond = parse_expression(true);
    if (skip_name("recursive")) fail_at(pos, "recursive for loops are not supported");
    std::string end = block_body(s->body, {"endfor", "else"});
    if (end == "else") block_body(s->else_body, {"endfor"});
    return s;
  }

  StmtPtr parse_set(size_t pos) {
    ExprPtr target;
    if (cur().type == TT::Name && look().type == TT::Operator && look().text == ".") {
      size_t p = cur().pos;
      auto ns = make(EK::Name, p);
      ns->name = expect_name();
      next();
      target = make(EK::GetAttr, p);
      target->name = expect_name();
      target->args.push_back(std::move(ns));
    } else {
      target = parse_assign_target(nullptr);
    }
    if (skip_op("=")) {
      auto s = make_stmt(SK::Set, pos);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      return s;
    }
    auto s = make_stmt(SK::SetBlock, pos);
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    block_body(s->body, {"endset"});
    return s;
  }

  void parse_signature(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
  }

  StmtPtr parse_macro(size_t pos) {
    auto s = make_stmt(SK::Macro, pos);
    s->text = expect_name();
    parse_signature(s->params);
    block_body(s->body, {"endmacro"});
    for (const auto& st : s->body) {
      s->catch_varargs = s->catch_varargs || reads_name(*st, "varargs");
      s->catch_kwargs = s->catch_kwargs || reads_name(*st, "kwargs");
    }
    return s;
  }

  static bool reads_name(const Expr& e, std::string_view name) {
    if (e.kind == EK::Name && e.name == name) return true;
    for (const auto& a : e.args)
      if (a && reads_name(*a, name)) return true;
    for (const auto& [k, v] : e.kwargs)
      if (v && reads_name(*v, name)) return true;
    return false;
  }

  static bool reads_name(const Stmt& s, std::string_view name) {
    for (const ExprPtr* e : {&s.expr, &s.target, &s.cond})
      if (*e && reads_name(**e, name)) return true;
    for (const auto& [c, body] : s.branches) {
      if (c && reads_name(*c, name)) return true;
      for (const auto& b : body)
        if (reads_name(*b, name)) return true;
    }
    for (const Body* body : {&s.body, &s.else_body})
      for (const auto& b : *body)
        if (reads_name(*b, name)) return true;
    for (const auto& p : s.params)
      if (p.default_value && reads_name(*p.default_value, name)) return true;
    return false;
  }

  StmtPtr parse_call_block(size_t pos) {
    auto s = make_stmt(SK::CallBlock, pos);
    if (is_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != EK::Call) fail_at(s->expr->pos, "expected call");
    block_body(s->body, {"endcall"});
    return s;
  }

  // for/set targets: a name or a tuple of names.
  ExprPtr parse_assign_target(const char* end_name) {
    size_t pos = cur().pos;
    std::vector<ExprPtr> items;
    bool tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      // jinja2 3.1 ends a target tuple only at %}, }} or ')': its `in` end rule never matches
      // (test_any gets a tuple), so `for x, in xs` is a syntax error there too.
      (void)end_name;
      if (cur().type == TT::BlockEnd || cur().type == TT::VarEnd || is_op(")")) break;
      if (skip_op("(")) {
        items.push_back(parse_assign_target(nullptr));
        expect_op(")");
      } else {
        if (cur().type != TT::Name) fail("can't assign to " + describe(cur()));
        const std::string& n = cur().text;
        if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
          fail("can't assign to constant '" + n + "'");
        auto e = make(EK::Name, cur().pos);
        e->name = n;
        next();
        items.push_back(std::move(e));
      }
      if (is_op(",")) tuple = true;
      else break;
    }
    if (items.empty()) fail("expected a name, got " + describe(cur()));
    if (!tuple) return std::move(items[0]);
    auto t = make(EK::Tuple, pos);
    t->args = std::move(items);
    return t;
  }

  // ---- expressions ----

  bool is_tuple_end(const char* extra_end) const {
    if (cur().type == TT::VarEnd || cur().type == TT::BlockEnd || is_op(")")) return true;
    return extra_end && is_name(extra_end);
  }

  ExprPtr parse_tuple(bool with_condexpr, const char* extra_end, bool explicit_parens = false) {
    size_t pos = cur().pos;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
    }
    auto t = make(EK::Tuple, pos);
    t->args = std::move(args);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      size_t pos = cur().pos;
      next();
      auto c = make(EK::Cond, pos);
      c->args.push_back(parse_or());
      c->args.push_back(std::move(e));
      c->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, size_t pos, ExprPtr l, ExprPtr r) {
    auto b = make(EK::Binary, pos);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) { size_t p = cur().pos; next(); l = binary("or", p, std::move(l), parse_and()); }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) { size_t p = cur().pos; next(); l = binary("and", p, std::move(l), parse_not()); }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      auto u = make(EK::Unary, cur().pos);
      next();
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    size_t pos = cur().pos;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TT::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && look().type == TT::Name && look().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(EK::Compare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      size_t p = cur().pos;
      next();
      l = binary(op, p, std::move(l), parse_concat());
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) { size_t p = cur().pos; next(); l = binary("~", p, std::move(l), parse_math2()); }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      size_t p = cur().pos;
      next();
      l = binary(op, p, std::move(l), parse_pow());
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) { size_t p = cur().pos; next(); l = binary("**", p, std::move(l), parse_unary(true)); }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto u = make(EK::Unary, cur().pos);
      u->name = cur().text;
      next();
      u->args.push_back(parse_unary(false));
      node = std::move(u);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    size_t pos = t.pos;
    if (t.type == TT::Name) {
      auto e = make(EK::Literal, pos);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else { e->kind = EK::Name; e->name = t.text; }
      next();
      return e;
    }
    if (t.type == TT::String) {
      std::string s;
      while (cur().type == TT::String) { s += cur().text; next(); }
      auto e = make(EK::Literal, pos);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == TT::Integer) {
      auto e = make(EK::Literal, pos);
      int64_t v = 0;
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec != std::errc()) e->value = Value::number(std::strtod(t.text.c_str(), nullptr));
      else e->value = Value::integer(v);
      next();
      return e;
    }
    if (t.type == TT::Float) {
      auto e = make(EK::Literal, pos);
      e->value = Value::number(std::strtod(t.text.c_str(), nullptr));
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, nullptr, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(EK::List, pos);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(EK::Dict, pos);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) node = parse_filter(std::move(node), false);
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    size_t pos = cur().pos;
    if (skip_op(".")) {
      if (cur().type == TT::Name) {
        auto e = make(EK::GetAttr, pos);
        e->name = cur().text;
        next();
        e->args.push_back(std::move(node));
        return e;
      }
      if (cur().type == TT::Integer) {
        auto e = make(EK::GetItem, pos);
        auto k = make(EK::Literal, cur().pos);
        k->value = Value::integer(std::atoll(cur().text.c_str()));
        next();
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(k));
        return e;
      }
      fail("expected name or number, got " + describe(cur()));
    }
    expect_op("[");
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) expect_op(",");
      items.push_back(parse_subscribed());
    }
    expect_op("]");
    if (items.empty()) fail_at(pos, "expected subscript");
    ExprPtr key;
    if (items.size() == 1) {
      key = std::move(items[0]);
    } else {
      for (const auto& it : items)
        if (it->kind == EK::Slice) fail_at(it->pos, "slices inside a tuple subscript are not supported");
      key = make(EK::Tuple, pos);
      key->args = std::move(items);
    }
    if (key->kind == EK::Slice) {  // the sliced object goes first
      key->args.insert(key->args.begin(), std::move(node));
      return key;
    }
    auto e = make(EK::GetItem, pos);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(key));
    return e;
  }

  // A subscript or slice (start:stop:step, each optional); a Slice node has 3 args, some null.
  ExprPtr parse_subscribed() {
    size_t pos = cur().pos;
    std::vector<ExprPtr> parts;
    if (skip_op(":")) {
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      parts.push_back(std::move(e));
    }
    if (is_op(":")) parts.push_back(nullptr);
    else if (!is_op("]") && !is_op(",")) parts.push_back(parse_expression(true));
    else parts.push_back(nullptr);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) parts.push_back(parse_expression(true));
      else parts.push_back(nullptr);
    } else {
      parts.push_back(nullptr);
    }
    auto s = make(EK::Slice, pos);
    s->args = std::move(parts);
    return s;
  }

  void parse_call_args(std::vector<ExprPtr>& args, KwArgs& kwargs) {
    expect_op("(");
    while (!is_op(")")) {
      if (!args.empty() || !kwargs.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == TT::Name && look().type == TT::Operator && look().text == "=") {
        std::string k = cur().text;
        next();
        next();
        kwargs.emplace_back(k, parse_expression(true));
      } else {
        if (!kwargs.empty()) fail("positional argument after keyword argument");
        args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(EK::Call, cur().pos);
    e->args.push_back(std::move(node));
    std::vector<ExprPtr> args;
    parse_call_args(args, e->kwargs);
    for (auto& a : args) e->args.push_back(std::move(a));
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (skip_op(".")) n += "." + expect_name();
    return n;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      size_t pos = cur().pos;
      auto f = make(EK::Filter, pos);
      f->name = dotted_name();
      f->args.push_back(std::move(node));
      if (is_op("(")) {
        std::vector<ExprPtr> args;
        parse_call_args(args, f->kwargs);
        for (auto& a : args) f->args.push_back(std::move(a));
      }
      node = std::move(f);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    next();  // is
    auto t = make(EK::Test, cur().pos);
    t->negated = skip_name("not");
    t->name = dotted_name();
    t->args.push_back(std::move(node));
    if (is_op("(")) {
      std::vector<ExprPtr> args;
      parse_call_args(args, t->kwargs);
      for (auto& a : args) t->args.push_back(std::move(a));
    } else if ((cur().type == TT::Name || cur().type == TT::String || cur().type == TT::Integer ||
                cur().type == TT::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& source) {
  return Parser(tokens, source).parse_template();
}

}  // namespace clover::chat::jinja
