// Tree-walking evaluator for parsed templates, with jinja2's scoping: a for-loop iteration, a macro
// call and a `with` block are scopes; `if` is not; a `set` in a loop body is not seen after the
// loop. Macros see the scope they were defined in (live), not their caller's.
//
// Work is bounded (output size, evaluation steps, call depth) so a hostile template fails with an
// error instead of hanging or exhausting memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace clover::chat::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{256} << 20;
  uint64_t max_steps = 200'000'000;  // expression evaluations and loop iterations
  int max_call_depth = 64;           // nested macro calls
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find_local(std::string_view name);
  void set(std::string_view name, Value v);
};

// Thrown by native functions to report an error at the position of the expression being evaluated;
// `raised` marks raise_exception().
struct NativeError : std::runtime_error {
  NativeError(std::string msg, bool r = false) : std::runtime_error(std::move(msg)), raised(r) {}
  bool raised;
};

class Interpreter {
 public:
  Interpreter(const std::string& source, RenderLimits limits);

  // Renders `body` with the variables of `context` (a dict) over `globals`.
  std::string render(const Body& body, const Value& context, const std::shared_ptr<Scope>& globals);

  // For builtins that take callables (map, select with macros, loop.cycle, caller).
  Value call(const Value& fn, CallArgs& args);
  void count_step();
  // namespace() registers what it creates here.
  void track_namespace(const std::shared_ptr<Dict>& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { Normal, Break, Continue };

  const std::string& source_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  size_t out_bytes_ = 0;
  std::shared_ptr<Scope> scope_;
  Value filter_input_;  // the body of a {% filter %} block
  std::vector<std::weak_ptr<Dict>> namespaces_;  // emptied after a render to break reference cycles

  [[noreturn]] void fail(size_t pos, const std::string& msg, bool raised = false) const;

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_macro_def(const Stmt& s);
  Value call_macro(const Stmt& macro, const std::shared_ptr<Scope>& closure, CallArgs& args);
  Value call_with_pos(const Value& fn, CallArgs& args, size_t pos);
  void assign(const Expr& target, const Value& v, Scope& scope);
  void emit(std::string& out, std::string_view text);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value lookup(const std::string& name) const;
  Value eval_binary(const Expr& e);
  bool eval_compare(const std::string& op, const Value& a, const Value& b);
  void eval_args(const Expr& e, size_t first, CallArgs& args);
};

// Python semantics used by the evaluator and the builtins.
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value binary_op(const std::string& op, const Value& a, const Value& b);  // + - * / // % ** ~

}  // namespace clover::chat::jinja
