// Runtime values of the Jinja interpreter, with Python semantics where chat templates can see them:
// str() of True/None/1.0, dict/list repr with single quotes, code-point string length and slicing,
// insertion-ordered dicts, and jinja2's lenient Undefined (falsy, prints "", fails on arithmetic).
//
// Lists, dicts and namespaces are shared by reference (as Python objects are), so a namespace
// mutated inside a macro is seen by its caller. Strings are UTF-8 bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace clover::chat::jinja {

class Value;
struct Dict;
struct Callable;
using ValueList = std::vector<Value>;

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // Undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(ValueList items, bool tuple = false);
  static Value dict(std::shared_ptr<Dict> d);
  static Value dict();  // empty
  static Value namespace_(std::shared_ptr<Dict> d);
  static Value callable(std::shared_ptr<Callable> c);
  // An undefined that remembers what was looked up, for error messages ("'dict object' has no
  // attribute 'x'").
  static Value undefined(std::string hint = {});

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }  // bool is not an int here
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_float() const { return f_; }
  double to_double() const;  // Int, Float or Bool
  const std::string& as_string() const { return s_; }
  const ValueList& as_list() const { return *list_; }
  ValueList& mutable_list() const { return *list_; }
  const std::shared_ptr<ValueList>& list_ptr() const { return list_; }
  Dict& as_dict() const { return *dict_; }
  const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
  Callable& as_callable() const { return *fn_; }
  const std::string& undefined_hint() const { return s_; }

  // Python truthiness.
  bool truthy() const;
  // Python type name, for error messages ("str", "dict", "NoneType", ...).
  std::string type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// Insertion-ordered mapping. Keys are compared with Python ==, so 1, 1.0 and True are one key.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  std::string repr;  // printed instead of the items when set (jinja2's loop prints "<LoopContext 1/3>")

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
  void set(std::string_view key, Value v) { set(Value::string(std::string(key)), std::move(v)); }
};

// Arguments of a call: positional, then keyword in source order.
struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;

  const Value* get_kw(std::string_view name) const;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
};

class Interpreter;
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Callable {
  std::string name;
  NativeFn fn;
};

// ---- Python semantics ---------------------------------------------------------------------------

// Python == between two values (1 == 1.0 == True; lists and dicts deep; undefined == undefined).
bool py_equal(const Value& a, const Value& b);
// Python str(): strings as-is, True/False/None, float repr, containers as repr. Undefined -> "".
std::string py_str(const Value& v);
// Python repr(): strings quoted the way Python picks quotes.
std::string py_repr(const Value& v);
// Python float repr: shortest round-trip digits, "1.0", "1e+16", "1e-05", "inf", "nan".
std::string py_float_repr(double d);

// json.dumps as HF's tojson calls it (ensure_ascii=False by default). With no indent, separators
// are ", " and ": "; with an indent, "," and ": ", as in Python. Throws std::runtime_error for
// values JSON cannot hold (undefined, callables, namespaces).
struct JsonDumpOptions {
  int indent = -1;  // < 0: None
  bool sort_keys = false;
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;
};
std::string py_json_dumps(const Value& v, const JsonDumpOptions& opt = {});

// nlohmann::json <-> Value. Objects keep their key order (use ordered_json).
Value from_json(const nlohmann::ordered_json& j);
nlohmann::ordered_json to_json(const Value& v);  // undefined -> null

// ---- UTF-8 helpers (Python strings index code points) --------------------------------------------

// Byte offsets of the start of each code point, plus s.size() at the end. Invalid bytes count as
// one code point each.
std::vector<size_t> utf8_offsets(std::string_view s);
size_t utf8_length(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);

}  // namespace clover::chat::jinja
