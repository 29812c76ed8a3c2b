// The interpreter's built-in filters, tests, methods and globals, each family in its own file
// (filters.cpp, tests.cpp, methods.cpp, globals in interpreter.cpp). Names and behaviour follow
// jinja2 3.1 and Python 3; HF's overrides (tojson, raise_exception, strftime_now) replace jinja2's.
#pragma once
#include <string>
#include <string_view>

#include "chat/jinja/value.h"

namespace clover::chat::jinja {

class Interpreter;

bool has_filter(std::string_view name);
bool has_test(std::string_view name);

// Throws std::runtime_error (the interpreter adds the position) on bad arguments.
Value apply_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);
bool apply_test(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);

// `obj.name` for Python methods (str.split, dict.items, ...): a bound callable, or undefined when
// the type has no such method.
Value get_method(const Value& obj, std::string_view name);

// Helpers shared by the builtins.
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
bool is_py_space(uint32_t cp);
// Iterates a value as a Python for loop would (dict -> keys, str -> characters, undefined ->
// nothing); throws std::runtime_error for non-iterables.
ValueList iterate(const Value& v);
// Python `<`: numbers, strings, sequences; throws for other pairs.
bool py_less(const Value& a, const Value& b);
// Python `fmt % args` (printf-style: %s %r %d %i %f %x %%, with flags and width).
std::string py_percent_format(const std::string& fmt, const Value& args);
// Python int(x) for a float: truncates toward zero; throws for inf/nan and for values outside
// int64 (Python's int is unbounded; ours is not, so such a value is an error, never wrapped).
int64_t py_int_from_float(double x);
// Python `x in container`.
bool py_contains(const Value& container, const Value& x);

}  // namespace clover::chat::jinja
