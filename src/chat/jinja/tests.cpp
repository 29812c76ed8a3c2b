// Jinja tests (`x is defined`, `x is mapping`, ...), as jinja2 3.1 defines them on Python objects.
// Note jinja2's quirks kept here: an undefined value is iterable, a sequence and callable; a dict
// is a sequence; a namespace is neither a mapping nor iterable.
#include <map>
#include <set>

#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"

namespace clover::chat::jinja {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& need(const CallArgs& a, const char* test) {
  if (a.pos.empty()) throw NativeError(std::string("test '") + test + "' needs an argument");
  return a.pos[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable() || v.is_undefined(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = need(a, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_list()) return v.list_ptr() == o.list_ptr();
  if (v.is_mapping()) return v.dict_ptr() == o.dict_ptr();
  if (v.is_callable()) return &v.as_callable() == &o.as_callable();
  return py_equal(v, o);
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, need(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, need(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return py_less(v, need(a, "lt")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return py_less(need(a, "gt"), v); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return !py_less(need(a, "le"), v); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return !py_less(v, need(a, "ge")); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return py_contains(need(a, "in"), v); }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value& d = need(a, "divisibleby");
  if (!v.is_number() || !d.is_number()) throw NativeError("divisibleby needs numbers");
  Value r = binary_op("%", v, d);
  return r.to_double() == 0.0;
}
bool t_even(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) throw NativeError("even needs an integer");
  return v.as_int() % 2 == 0;
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) throw NativeError("odd needs an integer");
  return v.as_int() % 2 != 0;
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v);
  return py_lower(s) == s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v);
  return py_upper(s) == s;
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.as_string()); }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.as_string()); }

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> m = {
      {"!=", t_ne}, {"<", t_lt}, {"<=", t_le}, {"==", t_eq}, {">", t_gt}, {">=", t_ge},
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
      {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {"greaterthan", t_gt}, {"gt", t_gt}, {"in", t_in},
      {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"lessthan", t_lt}, {"lower", t_lower},
      {"lt", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"none", t_none}, {"number", t_number}, {"odd", t_odd},
      {"sameas", t_sameas}, {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true},
      {"undefined", t_undefined}, {"upper", t_upper},
  };
  return m;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) > 0; }

bool apply_test(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw NativeError("No test named '" + std::string(name) + "'.");
  // Tests take the value and at most one argument; most take none (as in jinja2).
  static const std::set<std::string_view> one_arg = {"!=", "<", "<=", "==", ">", ">=", "divisibleby", "eq", "equalto",
                                                     "ge", "greaterthan", "gt", "in", "le", "lessthan", "lt", "ne", "sameas"};
  size_t allowed = one_arg.count(name) ? 1 : 0;
  if (args.pos.size() + args.kw.size() > allowed)
    throw NativeError("test_" + std::string(name) + "() takes " + std::to_string(allowed + 1) +
                      " positional argument" + (allowed ? "s" : "") + " but " +
                      std::to_string(args.pos.size() + args.kw.size() + 1) + " were given");
  return it->second(in, input, args);
}

}  // namespace clover::chat::jinja
