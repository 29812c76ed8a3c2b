#include "chat/jinja/interpreter.h"

#include <cmath>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"

namespace clover::chat::jinja {

using EK = Expr::Kind;
using SK = Stmt::Kind;

// ---- scopes ---------------------------------------------------------------------------------------

Value* Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  if (Value* p = find_local(name)) *p = std::move(v);
  else vars.emplace_back(std::string(name), std::move(v));
}

static std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

// Restores the current scope when a block ends, also on exceptions.
struct ScopeSwap {
  std::shared_ptr<Scope>& slot;
  std::shared_ptr<Scope> saved;
  ScopeSwap(std::shared_ptr<Scope>& s, std::shared_ptr<Scope> next) : slot(s), saved(s) { slot = std::move(next); }
  ~ScopeSwap() { slot = std::move(saved); }
};

// ---- Python object model --------------------------------------------------------------------------

[[noreturn]] static void undefined_error(const Value& v) {
  throw NativeError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  Value m = get_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_mapping()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
    return Value::undefined("'" + std::string(obj.is_dict() ? "dict object" : "Namespace") + "' has no attribute '" +
                            name + "'");
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

static bool to_index(const Value& k, int64_t& i) {
  if (k.is_int() || k.is_bool()) { i = k.as_int(); return true; }
  return false;
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if (obj.is_list() || obj.is_string()) {
    int64_t i;
    if (to_index(key, i)) {
      if (obj.is_list()) {
        int64_t n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.as_list()[i];
      } else {
        auto offs = utf8_offsets(obj.as_string());
        int64_t n = static_cast<int64_t>(offs.size()) - 1;
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::string(obj.as_string().substr(offs[i], offs[i + 1] - offs[i]));
      }
      return Value::undefined(obj.type_name() + " index out of range");
    }
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined("'" + obj.type_name() + " object' has no item " + py_repr(key));
}

static int64_t slice_bound(const Value& v, int64_t n, int64_t step, bool is_start) {
  if (v.is_none()) {
    if (step > 0) return is_start ? 0 : n;
    return is_start ? n - 1 : -1;
  }
  int64_t i;
  if (!to_index(v, i)) throw NativeError("slice indices must be integers or None");
  if (i < 0) {
    i += n;
    if (i < 0) i = step < 0 ? -1 : 0;
  } else if (i >= n) {
    i = step < 0 ? n - 1 : n;
  }
  return i;
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  int64_t step = 1;
  if (!step_v.is_none() && !to_index(step_v, step))
    throw NativeError("slice indices must be integers or None");
  if (step == 0) throw NativeError("slice step cannot be zero");
  if (!obj.is_list() && !obj.is_string()) return Value::undefined("'" + obj.type_name() + "' object is not subscriptable");
  std::vector<size_t> offs;
  int64_t n;
  if (obj.is_string()) {
    offs = utf8_offsets(obj.as_string());
    n = static_cast<int64_t>(offs.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.as_list().size());
  }
  int64_t b = slice_bound(start, n, step, true), e = slice_bound(stop, n, step, false);
  std::vector<int64_t> idx;
  if (step > 0)
    for (int64_t i = b; i < e; i += step) idx.push_back(i);
  else
    for (int64_t i = b; i > e; i += step) idx.push_back(i);
  if (obj.is_string()) {
    std::string out;
    if (step == 1 && !idx.empty()) return Value::string(obj.as_string().substr(offs[b], offs[e] - offs[b]));
    for (int64_t i : idx) out.append(obj.as_string(), offs[i], offs[i + 1] - offs[i]);
    return Value::string(std::move(out));
  }
  ValueList out;
  for (int64_t i : idx) out.push_back(obj.as_list()[i]);
  return Value::list(std::move(out), obj.is_tuple());
}

static bool int_like(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] static void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw NativeError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

static Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (n > 0 && seq.as_string().size() * static_cast<uint64_t>(n) > (size_t{64} << 20))
      throw NativeError("string repetition too large");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  if (n > 0 && seq.as_list().size() * static_cast<uint64_t>(n) > (size_t{1} << 22))
    throw NativeError("list repetition too large");
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out), seq.is_tuple());
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(py_str(a) + py_str(b));
  bool nums = a.is_number() && b.is_number();
  bool ints = int_like(a) && int_like(b);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (!__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
      return Value::number(a.to_double() + b.to_double());
    }
    if (nums) return Value::number(a.to_double() + b.to_double());
    if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    bad_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (!__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
    }
    if (nums) return Value::number(a.to_double() - b.to_double());
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (!__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
    }
    if (nums) return Value::number(a.to_double() * b.to_double());
    if ((a.is_string() || a.is_list()) && int_like(b)) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && int_like(a)) return repeat(b, a.as_int());
    bad_operands(op, a, b);
  }
  if (op == "/") {
    if (!nums) bad_operands(op, a, b);
    if (b.to_double() == 0.0) throw NativeError("division by zero");
    return Value::number(a.to_double() / b.to_double());
  }
  if (op == "//" || op == "%") {
    if (a.is_string() && op == "%") return Value::string(py_percent_format(a.as_string(), b));
    if (!nums) bad_operands(op, a, b);
    if (b.to_double() == 0.0) throw NativeError(ints ? "integer division or modulo by zero" : "float modulo");
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return Value::number(-a.to_double());
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) { --q; r += y; }
      return Value::integer(op == "//" ? q : r);
    }
    double x = a.to_double(), y = b.to_double();
    if (op == "//") return Value::number(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::number(r);
  }
  if (op == "**") {
    if (!nums) bad_operands(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      bool overflow = false;
      for (int64_t i = 0; i < e && !overflow; ++i) {
        overflow = __builtin_mul_overflow(r, base, &r);
        if (r == 0 || r == 1) break;
        if (r == -1 && base == -1) { r = (e % 2) ? -1 : 1; break; }
      }
      if (!overflow) return Value::integer(r);
    }
    return Value::number(std::pow(a.to_double(), b.to_double()));
  }
  throw NativeError("unknown operator " + op);
}

// ---- interpreter ----------------------------------------------------------------------------------

Interpreter::Interpreter(const std::string& source, RenderLimits limits) : source_(source), limits_(limits) {}

void Interpreter::fail(size_t pos, const std::string& msg, bool raised) const {
  int line, col;
  line_column(source_, pos, line, col);
  throw TemplateError(msg, line, col, raised);
}

void Interpreter::count_step() {
  if (++steps_ > limits_.max_steps) throw NativeError("template evaluation exceeded its step budget");
}

std::string Interpreter::render(const Body& body, const Value& context, const std::shared_ptr<Scope>& globals) {
  auto root = child_of(globals);
  if (context.is_mapping())
    for (const auto& [k, v] : context.as_dict().items)
      if (k.is_string()) root->set(k.as_string(), v);
  scope_ = root;
  struct Cleanup {
    Interpreter& in;
    ~Cleanup() {
      in.scope_.reset();
      for (auto& w : in.namespaces_)
        if (auto d = w.lock()) d->items.clear();
      in.namespaces_.clear();
    }
  } cleanup{*this};
  std::string out;
  exec(body, out);
  return out;
}

void Interpreter::emit(std::string& out, std::string_view text) {
  out_bytes_ += text.size();
  if (out_bytes_ > limits_.max_output_bytes) throw NativeError("template output exceeded its size limit");
  out.append(text);
}

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  try {
    count_step();
    switch (s.kind) {
      case SK::Text: emit(out, s.text); return Flow::Normal;
      case SK::Print: emit(out, py_str(eval(*s.expr))); return Flow::Normal;
      case SK::If:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond).truthy()) return exec(body, out);
        return exec(s.else_body, out);
      case SK::For: return exec_for(s, out);
      case SK::Set: assign(*s.target, eval(*s.expr), *scope_); return Flow::Normal;
      case SK::SetBlock: {
        std::string text;
        exec(s.body, text);
        Value v = Value::string(std::move(text));
        if (s.expr) {
          Value saved = std::exchange(filter_input_, v);
          v = eval(*s.expr);
          filter_input_ = saved;
        }
        assign(*s.target, v, *scope_);
        return Flow::Normal;
      }
      case SK::Macro: exec_macro_def(s); return Flow::Normal;
      case SK::CallBlock: {
        auto caller = std::make_shared<Callable>();
        caller->name = "caller";
        const Stmt* stmt = &s;
        std::shared_ptr<Scope> closure = scope_;
        caller->fn = [this, stmt, closure](Interpreter&, CallArgs& a) { return call_macro(*stmt, closure, a); };
        const Expr& call = *s.expr;
        Value fn = eval(*call.args[0]);
        CallArgs args;
        eval_args(call, 1, args);
        args.kw.emplace_back("caller", Value::callable(caller));
        emit(out, py_str(call_with_pos(fn, args, call.pos)));
        return Flow::Normal;
      }
      case SK::FilterBlock: {
        std::string text;
        exec(s.body, text);
        Value saved = std::exchange(filter_input_, Value::string(std::move(text)));
        Value v = eval(*s.expr);
        filter_input_ = saved;
        emit(out, py_str(v));
        return Flow::Normal;
      }
      case SK::With: {
        auto sc = child_of(scope_);
        for (const auto& p : s.params) sc->set(p.name, eval(*p.default_value));
        ScopeSwap swap(scope_, sc);
        return exec(s.body, out);
      }
      case SK::Scope: return exec(s.body, out);
      case SK::Break: return Flow::Break;
      case SK::Continue: return Flow::Continue;
    }
  } catch (const NativeError& e) {
    fail(s.pos, e.what(), e.raised);
  } catch (const std::length_error& e) {
    fail(s.pos, "value too large");
  } catch (const std::bad_alloc&) {
    fail(s.pos, "out of memory");
  }
  return Flow::Normal;
}

void Interpreter::assign(const Expr& target, const Value& v, Scope& scope) {
  if (target.kind == EK::Name) {
    scope.set(target.name, v);
    return;
  }
  if (target.kind == EK::GetAttr) {  // namespace attribute
    Value ns = lookup(target.args[0]->name);
    if (!ns.is_namespace()) fail(target.pos, "cannot assign attribute on non-namespace object");
    ns.as_dict().set(target.name, v);
    return;
  }
  // Tuple unpacking.
  ValueList items = iterate(v);
  if (items.size() != target.args.size())
    fail(target.pos, items.size() > target.args.size() ? "too many values to unpack (expected " +
                                                             std::to_string(target.args.size()) + ")"
                                                       : "not enough values to unpack (expected " +
                                                             std::to_string(target.args.size()) + ", got " +
                                                             std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i], scope);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, std::string& out) {
  ValueList items = iterate(eval(*s.expr));
  if (s.cond) {  // `for x in xs if cond`: the loop sees only the items that pass
    ValueList kept;
    for (auto& it : items) {
      auto sc = child_of(scope_);
      assign(*s.target, it, *sc);
      ScopeSwap swap(scope_, sc);
      if (eval(*s.cond).truthy()) kept.push_back(std::move(it));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    count_step();
    auto sc = child_of(scope_);
    assign(*s.target, items[i], *sc);
    auto loop = std::make_shared<Dict>();
    loop->set("index0", Value::integer(i));
    loop->set("index", Value::integer(i + 1));
    loop->set("revindex0", Value::integer(n - i - 1));
    loop->set("revindex", Value::integer(n - i));
    loop->set("first", Value::boolean(i == 0));
    loop->set("last", Value::boolean(i == n - 1));
    loop->set("length", Value::integer(n));
    loop->set("depth", Value::integer(1));
    loop->set("depth0", Value::integer(0));
    if (i > 0) loop->set("previtem", items[i - 1]);
    if (i + 1 < n) loop->set("nextitem", items[i + 1]);
    auto cycle = std::make_shared<Callable>();
    cycle->name = "cycle";
    cycle->fn = [i](Interpreter&, CallArgs& a) {
      if (a.pos.empty()) throw NativeError("no items for cycling given");
      return a.pos[static_cast<size_t>(i) % a.pos.size()];
    };
    loop->set("cycle", Value::callable(cycle));
    loop->repr = "<LoopContext " + std::to_string(i + 1) + "/" + std::to_string(n) + ">";
    sc->set("loop", Value::dict(loop));
    ScopeSwap swap(scope_, sc);
    Flow f = exec(s.body, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_macro_def(const Stmt& s) {
  auto fn = std::make_shared<Callable>();
  fn->name = s.text;
  const Stmt* stmt = &s;
  std::weak_ptr<Scope> weak = scope_;
  // The closure is held weakly: the macro lives in the scope it captures.
  fn->fn = [this, stmt, weak](Interpreter&, CallArgs& a) {
    auto closure = weak.lock();
    if (!closure) throw NativeError("macro '" + stmt->text + "' called outside its scope");
    return call_macro(*stmt, closure, a);
  };
  scope_->set(s.text, Value::callable(fn));
}

Value Interpreter::call_macro(const Stmt& m, const std::shared_ptr<Scope>& closure, CallArgs& a) {
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    throw NativeError("maximum macro recursion depth exceeded");
  }
  struct Depth { int& d; ~Depth() { --d; } } depth{call_depth_};
  auto sc = child_of(closure);
  ValueList varargs;
  if (m.kind == SK::Macro && !m.catch_varargs && a.pos.size() > m.params.size())
    throw NativeError("macro '" + m.text + "' takes not more than " + std::to_string(m.params.size()) +
                      " argument(s)");
  for (size_t i = 0; i < a.pos.size(); ++i) {
    if (i < m.params.size()) sc->set(m.params[i].name, a.pos[i]);
    else varargs.push_back(a.pos[i]);
  }
  auto kwargs = std::make_shared<Dict>();
  for (const auto& [k, v] : a.kw) {
    if (k == "caller") { sc->set("caller", v); continue; }
    bool known = false;
    for (size_t i = 0; i < m.params.size(); ++i)
      if (m.params[i].name == k) {
        if (i < a.pos.size()) throw NativeError("macro '" + m.text + "' got multiple values for argument '" + k + "'");
        sc->set(k, v);
        known = true;
      }
    if (!known && m.kind == SK::Macro && !m.catch_kwargs)
      throw NativeError("macro '" + m.text + "' takes no keyword argument '" + k + "'");
    if (!known) kwargs->set(k, v);
  }
  ScopeSwap swap(scope_, sc);
  for (const auto& p : m.params)
    if (!sc->find_local(p.name))
      sc->set(p.name, p.default_value ? eval(*p.default_value)
                                      : Value::undefined("parameter '" + p.name + "' was not provided"));
  sc->set("varargs", Value::list(std::move(varargs), true));
  sc->set("kwargs", Value::dict(kwargs));
  std::string out;
  exec(m.body, out);
  return Value::string(std::move(out));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) undefined_error(fn);
  if (!fn.is_callable()) throw NativeError("'" + fn.type_name() + "' object is not callable");
  return fn.as_callable().fn(*this, args);
}

Value Interpreter::call_with_pos(const Value& fn, CallArgs& args, size_t pos) {
  try {
    return call(fn, args);
  } catch (const NativeError& e) {
    fail(pos, e.what(), e.raised);
  }
}

Value Interpreter::lookup(const std::string& name) const {
  for (Scope* s = scope_.get(); s; s = s->parent.get())
    if (Value* v = s->find_local(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::eval_args(const Expr& e, size_t first, CallArgs& args) {
  for (size_t i = first; i < e.args.size(); ++i) args.pos.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) args.kw.emplace_back(k, eval(*v));
}

Value Interpreter::eval(const Expr& e) {
  try {
    count_step();
    return eval_inner(e);
  } catch (const NativeError& err) {
    fail(e.pos, err.what(), err.raised);
  } catch (const std::length_error&) {
    fail(e.pos, "value too large");
  }
}

bool Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "in") return py_contains(b, a);
  if (op == "not in") return !py_contains(b, a);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "<") return py_less(a, b);
  if (op == ">") return py_less(b, a);
  if (op == "<=") return !py_less(b, a);
  return !py_less(a, b);  // >=
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case EK::Literal: return e.value;
    case EK::Name: return lookup(e.name);
    case EK::List: case EK::Tuple: {
      ValueList items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::list(std::move(items), e.kind == EK::Tuple);
    }
    case EK::Dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i]);
        d->set(k, eval(*e.args[i + 1]));
      }
      return Value::dict(d);
    }
    case EK::GetAttr: return get_attribute(eval(*e.args[0]), e.name);
    case EK::GetItem: {
      Value obj = eval(*e.args[0]);
      return get_item(obj, eval(*e.args[1]));
    }
    case EK::Slice: {
      Value obj = eval(*e.args[0]);
      Value parts[3] = {Value::none(), Value::none(), Value::none()};
      for (int i = 0; i < 3; ++i)
        if (e.args[i + 1]) parts[i] = eval(*e.args[i + 1]);
      return slice_value(obj, parts[0], parts[1], parts[2]);
    }
    case EK::Call: {
      Value fn = eval(*e.args[0]);
      CallArgs args;
      eval_args(e, 1, args);
      return call(fn, args);
    }
    case EK::Filter: {
      Value input = e.args[0] ? eval(*e.args[0]) : filter_input_;
      CallArgs args;
      eval_args(e, 1, args);
      return apply_filter(*this, e.name, input, args);
    }
    case EK::Test: {
      Value input = eval(*e.args[0]);
      CallArgs args;
      eval_args(e, 1, args);
      return Value::boolean(apply_test(*this, e.name, input, args) != e.negated);
    }
    case EK::Unary: {
      Value v = eval(*e.args[0]);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) throw NativeError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::number(-v.as_float());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) return Value::number(-v.to_double());
      return Value::integer(-v.as_int());
    }
    case EK::Binary: {
      if (e.name == "and") {
        Value a = eval(*e.args[0]);
        return a.truthy() ? eval(*e.args[1]) : a;
      }
      if (e.name == "or") {
        Value a = eval(*e.args[0]);
        return a.truthy() ? a : eval(*e.args[1]);
      }
      Value a = eval(*e.args[0]);
      Value b = eval(*e.args[1]);
      return binary_op(e.name, a, b);
    }
    case EK::Compare: {
      Value a = eval(*e.args[0]);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value b = eval(*e.args[i + 1]);
        if (!eval_compare(e.ops[i], a, b)) return Value::boolean(false);
        a = std::move(b);
      }
      return Value::boolean(true);
    }
    case EK::Cond:
      if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("conditional expression had no else branch");
  }
  return Value();
}

}  // namespace clover::chat::jinja
