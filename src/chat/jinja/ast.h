// Syntax tree of a parsed template. Two node types, each a tagged record: Expr (expressions) and
// Stmt (statements). Every node keeps the byte offset it starts at, for line/column in errors.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace clover::chat::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // args = items
    Tuple,     // args = items
    Dict,      // args = k0, v0, k1, v1, ...
    GetAttr,   // args[0].name
    GetItem,   // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]], null parts omitted
    Call,      // args[0](args[1:], kwargs)
    Filter,    // args[0] | name(args[1:], kwargs); args[0] is null inside {% filter %}
    Test,      // args[0] is [not] name(args[1:]); negated
    Unary,     // op args[0]: "-", "+", "not"
    Binary,    // args[0] op args[1]: + - * / // % ** ~ and or
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (chained, like Python)
    Cond,      // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  size_t pos = 0;
  Value value;
  std::string name;  // Name id, attribute, filter/test name, operator
  std::vector<ExprPtr> args;
  KwArgs kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Print,        // {{ expr }}
    If,           // branches (cond, body)...; else_body
    For,          // for target in expr [if cond] body [else else_body]
    Set,          // set target = expr
    SetBlock,     // set target %} body {% endset (expr = optional filter chain)
    Macro,        // macro name(params) body
    CallBlock,    // call(params) expr %} body (body is `caller`)
    FilterBlock,  // filter expr %} body (expr is a Filter chain over null)
    With,         // with params %} body
    Scope,        // body only ({% generation %})
    Break,
    Continue,
  };
  Kind kind;
  size_t pos = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
  bool catch_varargs = false;  // Macro: the body reads `varargs` (else extra positionals are an error)
  bool catch_kwargs = false;   // Macro: the body reads `kwargs` (else unknown keywords are an error)
};

}  // namespace clover::chat::jinja
