#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace clover::chat::jinja {

// ---- construction ---------------------------------------------------------------------------------

Value Value::none() { Value v; v.kind_ = Kind::None; return v; }
Value Value::boolean(bool b) { Value v; v.kind_ = Kind::Bool; v.b_ = b; v.i_ = b; return v; }
Value Value::integer(int64_t i) { Value v; v.kind_ = Kind::Int; v.i_ = i; return v; }
Value Value::number(double d) { Value v; v.kind_ = Kind::Float; v.f_ = d; return v; }
Value Value::string(std::string s) { Value v; v.kind_ = Kind::String; v.s_ = std::move(s); return v; }
Value Value::list(ValueList items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::dict(std::shared_ptr<Dict> d) { Value v; v.kind_ = Kind::Dict; v.dict_ = std::move(d); return v; }
Value Value::dict() { return dict(std::make_shared<Dict>()); }
Value Value::namespace_(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.dict_ = std::move(d);
  return v;
}
Value Value::callable(std::shared_ptr<Callable> c) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::move(c);
  return v;
}
Value Value::undefined(std::string hint) { Value v; v.s_ = std::move(hint); return v; }

double Value::to_double() const {
  switch (kind_) {
    case Kind::Int: return static_cast<double>(i_);
    case Kind::Float: return f_;
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->items.empty();
    case Kind::Namespace: case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return tuple_ ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

// ---- Dict, CallArgs --------------------------------------------------------------------------------

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value v) {
  for (auto& [k, old] : items)
    if (py_equal(k, key)) { old = std::move(v); return; }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get_kw(std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  return get_kw(name);
}

// ---- equality -------------------------------------------------------------------------------------

bool py_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) return a.as_int() == b.as_int();
    return a.to_double() == b.to_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined: case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const auto &x = a.as_dict().items, &y = b.as_dict().items;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* o = b.as_dict().find(k);
        if (!o || !py_equal(v, *o)) return false;
      }
      return true;
    }
    case K::Namespace: return a.dict_ptr() == b.dict_ptr();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

// ---- str / repr -----------------------------------------------------------------------------------

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') { sign = "-"; sci.erase(0, 1); }
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  int decpt = exp + 1;
  int n = static_cast<int>(digits.size());
  if (decpt <= 0) return sign + "0." + std::string(-decpt, '0') + digits;
  if (decpt >= n) return sign + digits + std::string(decpt - n, '0') + ".0";
  return sign + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  out += q;
  return out;
}

// Containers can hold themselves through a namespace; Python prints such a cycle as "...".
static thread_local int repr_depth = 0;
struct ReprDepth {
  ReprDepth() { ++repr_depth; }
  ~ReprDepth() { --repr_depth; }
};

std::string py_repr(const Value& v) {
  using K = Value::Kind;
  ReprDepth guard;
  if (repr_depth > 200 && (v.is_list() || v.is_mapping())) return "...";
  switch (v.kind()) {
    case K::String: return repr_string(v.as_string());
    case K::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      const auto& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += py_repr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case K::Dict: {
      if (!v.as_dict().repr.empty()) return v.as_dict().repr;
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
      }
      return out + "}";
    }
    case K::Undefined: return "Undefined";
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Undefined: return "";
    case K::None: return "None";
    case K::Bool: return v.as_bool() ? "True" : "False";
    case K::Int: return std::to_string(v.as_int());
    case K::Float: return py_float_repr(v.as_float());
    case K::String: return v.as_string();
    case K::Namespace: {
      ReprDepth guard;
      if (repr_depth > 200) return "...";
      return "<Namespace " + py_repr(Value::dict(v.dict_ptr())) + ">";
    }
    case K::Callable: return "<function " + v.as_callable().name + ">";
    default: return py_repr(v);
  }
}

// ---- JSON -----------------------------------------------------------------------------------------

static void json_escape(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto offs = utf8_offsets(s);
  for (size_t i = 0; i + 1 < offs.size(); ++i) {
    size_t b = offs[i], e = offs[i + 1];
    unsigned char c = s[b];
    if (e - b == 1) {
      switch (c) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
        default: break;
      }
      if (c < 0x20 || (ensure_ascii && c >= 0x80)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      continue;
    }
    if (!ensure_ascii) { out.append(s, b, e - b); continue; }
    uint32_t cp = c & (0xff >> (e - b + 1));
    for (size_t k = b + 1; k < e; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3f);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  out += '"';
}

namespace {
struct JsonDumper {
  int indent;
  bool sort_keys;
  bool ensure_ascii;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int depth) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * depth, ' ');
  }

  std::string key_string(const Value& k) {
    if (k.is_string()) return k.as_string();
    if (k.is_bool()) return k.as_bool() ? "true" : "false";
    if (k.is_int()) return std::to_string(k.as_int());
    if (k.is_float()) return py_float_repr(k.as_float());
    if (k.is_none()) return "null";
    throw std::runtime_error("keys must be str, int, float, bool or None, not " + k.type_name());
  }

  void dump(const Value& v, int depth) {
    if (depth > 512) throw std::runtime_error("tojson: value nested too deeply");
    using K = Value::Kind;
    switch (v.kind()) {
      case K::None: out += "null"; return;
      case K::Bool: out += v.as_bool() ? "true" : "false"; return;
      case K::Int: out += std::to_string(v.as_int()); return;
      case K::Float: {
        double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
        else out += py_float_repr(d);
        return;
      }
      case K::String: json_escape(out, v.as_string(), ensure_ascii); return;
      case K::List: {
        const auto& items = v.as_list();
        if (items.empty()) { out += "[]"; return; }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(depth + 1);
          dump(items[i], depth + 1);
        }
        if (indent >= 0) newline(depth);
        out += ']';
        return;
      }
      case K::Dict: {
        std::vector<std::pair<std::string, const Value*>> kv;
        for (const auto& [k, x] : v.as_dict().items) kv.emplace_back(key_string(k), &x);
        if (kv.empty()) { out += "{}"; return; }
        if (sort_keys)
          std::stable_sort(kv.begin(), kv.end(), [](auto& a, auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t i = 0; i < kv.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(depth + 1);
          json_escape(out, kv[i].first, ensure_ascii);
          out += key_sep;
          dump(*kv[i].second, depth + 1);
        }
        if (indent >= 0) newline(depth);
        out += '}';
        return;
      }
      default:
        throw std::runtime_error("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};
}  // namespace

std::string py_json_dumps(const Value& v, const JsonDumpOptions& opt) {
  JsonDumper d{opt.indent, opt.sort_keys, opt.ensure_ascii, opt.indent >= 0 ? "," : ", ", ": ", {}};
  if (opt.separators) { d.item_sep = opt.separators->first; d.key_sep = opt.separators->second; }
  d.dump(v, 0);
  return std::move(d.out);
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<Dict>();
      d->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d->items.emplace_back(Value::string(it.key()), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

nlohmann::ordered_json to_json(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Bool: return v.as_bool();
    case K::Int: return v.as_int();
    case K::Float: return v.as_float();
    case K::String: return v.as_string();
    case K::List: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& x : v.as_list()) a.push_back(to_json(x));
      return a;
    }
    case K::Dict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, x] : v.as_dict().items) o[py_str(k)] = to_json(x);
      return o;
    }
    default: return nullptr;
  }
}

// ---- UTF-8 ----------------------------------------------------------------------------------------

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> offs;
  offs.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    offs.push_back(i);
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) { n = 1; break; }
    i += n;
  }
  offs.push_back(s.size());
  return offs;
}

size_t utf8_length(std::string_view s) { return utf8_offsets(s).size() - 1; }

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace clover::chat::jinja
