// Python methods callable from templates (str.split, dict.items, ...) and the Python object
// helpers the other builtins share. Mutating methods (list.append, dict.update, ...) are absent, as
// in HF's ImmutableSandboxedEnvironment: looking them up gives undefined.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"

namespace clover::chat::jinja {

namespace {

// Code points of a UTF-8 string (invalid bytes map to themselves as code points 0x80..0xff).
std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> cps;
  auto offs = utf8_offsets(s);
  for (size_t i = 0; i + 1 < offs.size(); ++i) {
    size_t b = offs[i], e = offs[i + 1];
    unsigned char c = s[b];
    if (e - b == 1) { cps.push_back(c); continue; }
    uint32_t cp = c & (0xff >> (e - b + 1));
    for (size_t k = b + 1; k < e; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3f);
    cps.push_back(cp);
  }
  return cps;
}

std::string encode(const std::vector<uint32_t>& cps, size_t b = 0, size_t e = std::string::npos) {
  std::string out;
  e = std::min(e, cps.size());
  for (size_t i = b; i < e; ++i) utf8_append(out, cps[i]);
  return out;
}

uint32_t lower_cp(uint32_t c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 32;  // Greek
  if (c >= 0x410 && c <= 0x42f) return c + 32;                // Cyrillic
  return c;
}
uint32_t upper_cp(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  return c;
}
bool is_cased_lower(uint32_t c) { return upper_cp(c) != c; }
bool is_cased_upper(uint32_t c) { return lower_cp(c) != c; }
bool is_alpha(uint32_t c) { return is_cased_lower(c) || is_cased_upper(c) || (c > 0x7f && !is_py_space(c)); }
bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

std::string str_arg(const CallArgs& a, size_t i, std::string_view name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string()) throw NativeError(std::string(method) + "() argument must be str");
  return v->as_string();
}

// strip/lstrip/rstrip with Python's optional character set.
std::string strip_impl(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = decode(s);
  std::vector<uint32_t> set;
  bool ws = !chars || chars->is_none();
  if (!ws) {
    if (!chars->is_string()) throw NativeError("strip arg must be None or str");
    set = decode(chars->as_string());
  }
  auto strip_it = [&](uint32_t c) { return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  return encode(cps, b, e);
}

ValueList split_impl(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  ValueList out;
  if (!sep || sep->is_none()) {
    auto cps = decode(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      size_t b = i;
      while (i < cps.size() && !is_py_space(cps[i])) ++i;
      words.emplace_back(b, i);
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      if (!from_right) {
        size_t rest_begin = words[maxsplit].first;
        size_t e = cps.size();
        while (e > rest_begin && is_py_space(cps[e - 1])) --e;
        words.resize(maxsplit);
        words.emplace_back(rest_begin, e);
      } else {
        size_t keep_from = words.size() - maxsplit;
        size_t rest_end = words[keep_from - 1].second;
        size_t b = 0;
        while (b < rest_end && is_py_space(cps[b])) ++b;
        words.erase(words.begin(), words.begin() + keep_from);
        words.insert(words.begin(), {b, rest_end});
      }
    }
    for (auto [b, e] : words) out.push_back(Value::string(encode(cps, b, e)));
    return out;
  }
  if (!sep->is_string()) throw NativeError("must be str or None, not " + sep->type_name());
  const std::string& d = sep->as_string();
  if (d.empty()) throw NativeError("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      size_t f = s.find(d, pos);
      if (f == std::string::npos) break;
      parts.push_back(s.substr(pos, f - pos));
      pos = f + d.size();
      ++n;
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < d.size()) break;
      size_t f = s.rfind(d, end - d.size());
      if (f == std::string::npos) break;
      rev.push_back(s.substr(f + d.size(), end - f - d.size()));
      end = f;
      ++n;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

bool affix_match(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw NativeError(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_list()) {
    for (const auto& a : arg.as_list())
      if (one(a)) return true;
    return false;
  }
  return one(arg);
}

std::string title_impl(const std::string& s) {
  auto cps = decode(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    bool cased = is_cased_lower(c) || is_cased_upper(c);
    c = cased ? (prev_cased ? lower_cp(c) : upper_cp(c)) : c;
    prev_cased = cased;
  }
  return encode(cps);
}

int64_t int_arg(const CallArgs& a, size_t i, std::string_view name, int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool()) throw NativeError("an integer is required");
  return v->as_int();
}

// Python str.format with positional and named fields, no format specs.
std::string format_impl(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
      size_t e = fmt.find('}', i);
      if (e == std::string::npos) throw NativeError("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!") != std::string::npos) throw NativeError("format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) v = auto_idx < a.pos.size() ? &a.pos[auto_idx++] : nullptr;
      else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        size_t k = std::stoul(field);
        v = k < a.pos.size() ? &a.pos[k] : nullptr;
      } else v = a.get_kw(field);
      if (!v) throw NativeError("format: missing argument '" + field + "'");
      out += py_str(*v);
      i = e;
    } else if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else throw NativeError("Single '}' encountered in format string");
      out += '}';
    } else {
      out += c;
    }
  }
  return out;
}

Value bind_method(const Value& self, std::string name, std::function<Value(const Value&, CallArgs&)> f) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = [self, f](Interpreter&, CallArgs& a) { return f(self, a); };
  return Value::callable(c);
}

Value string_method(const Value& obj, std::string_view name) {
  using A = CallArgs;
  const std::string n(name);
  if (n == "startswith" || n == "endswith") {
    bool prefix = n == "startswith";
    return bind_method(obj, n, [prefix](const Value& s, A& a) {
      if (a.pos.empty()) throw NativeError("startswith/endswith takes at least 1 argument");
      return Value::boolean(affix_match(s.as_string(), a.pos[0], prefix));
    });
  }
  if (n == "split" || n == "rsplit") {
    bool right = n == "rsplit";
    return bind_method(obj, n, [right](const Value& s, A& a) {
      return Value::list(split_impl(s.as_string(), a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1), right));
    });
  }
  if (n == "strip" || n == "lstrip" || n == "rstrip") {
    bool l = n != "rstrip", r = n != "lstrip";
    return bind_method(obj, n, [l, r](const Value& s, A& a) { return Value::string(strip_impl(s.as_string(), a.get(0, "chars"), l, r)); });
  }
  if (n == "upper") return bind_method(obj, n, [](const Value& s, A&) { return Value::string(py_upper(s.as_string())); });
  if (n == "lower" || n == "casefold")
    return bind_method(obj, n, [](const Value& s, A&) { return Value::string(py_lower(s.as_string())); });
  if (n == "title") return bind_method(obj, n, [](const Value& s, A&) { return Value::string(title_impl(s.as_string())); });
  if (n == "capitalize")
    return bind_method(obj, n, [](const Value& s, A&) {
      auto cps = decode(s.as_string());
      for (size_t i = 0; i < cps.size(); ++i) cps[i] = i ? lower_cp(cps[i]) : upper_cp(cps[i]);
      return Value::string(encode(cps));
    });
  if (n == "swapcase")
    return bind_method(obj, n, [](const Value& s, A&) {
      auto cps = decode(s.as_string());
      for (auto& c : cps) c = is_cased_upper(c) ? lower_cp(c) : upper_cp(c);
      return Value::string(encode(cps));
    });
  if (n == "replace")
    return bind_method(obj, n, [](const Value& s, A& a) {
      std::string old = str_arg(a, 0, "old", "replace"), nw = str_arg(a, 1, "new", "replace");
      int64_t count = int_arg(a, 2, "count", -1);
      const std::string& src = s.as_string();
      std::string out;
      if (old.empty()) {
        auto offs = utf8_offsets(src);
        int64_t done = 0;
        for (size_t i = 0; i + 1 < offs.size(); ++i) {
          if (count < 0 || done < count) { out += nw; ++done; }
          out.append(src, offs[i], offs[i + 1] - offs[i]);
        }
        if (count < 0 || done < count) out += nw;
        return Value::string(std::move(out));
      }
      size_t pos = 0;
      int64_t done = 0;
      while (count < 0 || done < count) {
        size_t f = src.find(old, pos);
        if (f == std::string::npos) break;
        out.append(src, pos, f - pos);
        out += nw;
        pos = f + old.size();
        ++done;
      }
      out.append(src, pos);
      return Value::string(std::move(out));
    });
  if (n == "find" || n == "rfind" || n == "index" || n == "rindex" || n == "count")
    return bind_method(obj, n, [n](const Value& s, A& a) {
      std::string sub = str_arg(a, 0, "sub", n.c_str());
      const std::string& src = s.as_string();
      if (n == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(src)) + 1);
        int64_t c = 0;
        for (size_t p = src.find(sub); p != std::string::npos; p = src.find(sub, p + sub.size())) ++c;
        return Value::integer(c);
      }
      size_t f = (n == "find" || n == "index") ? src.find(sub) : src.rfind(sub);
      if (f == std::string::npos) {
        if (n == "index" || n == "rindex") throw NativeError("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(utf8_length(std::string_view(src).substr(0, f))));
    });
  if (n == "join")
    return bind_method(obj, n, [](const Value& s, A& a) {
      if (a.pos.empty()) throw NativeError("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const auto& x : iterate(a.pos[0])) {
        if (!x.is_string()) throw NativeError("sequence item: expected str instance, " + x.type_name() + " found");
        if (!first) out += s.as_string();
        first = false;
        out += x.as_string();
      }
      return Value::string(std::move(out));
    });
  if (n == "isdigit" || n == "isalpha" || n == "isalnum" || n == "isspace" || n == "isupper" || n == "islower" ||
      n == "isnumeric" || n == "isdecimal")
    return bind_method(obj, n, [n](const Value& s, A&) {
      auto cps = decode(s.as_string());
      if (cps.empty()) return Value::boolean(false);
      if (n == "isupper" || n == "islower") {
        bool any = false;
        for (auto c : cps) {
          if (n == "isupper" ? is_cased_lower(c) : is_cased_upper(c)) return Value::boolean(false);
          any = any || is_cased_lower(c) || is_cased_upper(c);
        }
        return Value::boolean(any);
      }
      for (auto c : cps) {
        bool ok = n == "isalpha" ? is_alpha(c) : n == "isalnum" ? (is_alpha(c) || is_digit(c)) : n == "isspace" ? is_py_space(c) : is_digit(c);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  if (n == "splitlines")
    return bind_method(obj, n, [](const Value& s, A& a) {
      const Value* keep = a.get(0, "keepends");
      bool keepends = keep && keep->truthy();
      ValueList out;
      const std::string& src = s.as_string();
      size_t b = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        if (src[i] != '\n' && src[i] != '\r') continue;
        size_t e = i;
        if (src[i] == '\r' && i + 1 < src.size() && src[i + 1] == '\n') ++i;
        out.push_back(Value::string(src.substr(b, (keepends ? i + 1 : e) - b)));
        b = i + 1;
      }
      if (b < src.size()) out.push_back(Value::string(src.substr(b)));
      return Value::list(std::move(out));
    });
  if (n == "format") return bind_method(obj, n, [](const Value& s, A& a) { return Value::string(format_impl(s.as_string(), a)); });
  if (n == "removeprefix" || n == "removesuffix")
    return bind_method(obj, n, [n](const Value& s, A& a) {
      std::string x = str_arg(a, 0, "prefix", n.c_str());
      const std::string& src = s.as_string();
      if (n == "removeprefix" && src.compare(0, x.size(), x) == 0) return Value::string(src.substr(x.size()));
      if (n == "removesuffix" && !x.empty() && src.size() >= x.size() && src.compare(src.size() - x.size(), x.size(), x) == 0)
        return Value::string(src.substr(0, src.size() - x.size()));
      return s;
    });
  if (n == "zfill" || n == "center" || n == "ljust" || n == "rjust")
    return bind_method(obj, n, [n](const Value& s, A& a) {
      int64_t width = int_arg(a, 0, "width", 0);
      if (width > (1 << 20)) throw NativeError("width too large");
      const Value* f = a.get(1, "fillchar");
      std::string fill = f && f->is_string() ? f->as_string() : (n == "zfill" ? "0" : " ");
      auto cps = decode(s.as_string());
      int64_t pad = width - static_cast<int64_t>(cps.size());
      if (pad <= 0) return s;
      auto rep = [&](int64_t k) { std::string r; for (int64_t i = 0; i < k; ++i) r += fill; return r; };
      if (n == "ljust") return Value::string(s.as_string() + rep(pad));
      if (n == "rjust") return Value::string(rep(pad) + s.as_string());
      if (n == "center") {
        int64_t left = pad / 2 + (pad & width & 1);
        return Value::string(rep(left) + s.as_string() + rep(pad - left));
      }
      std::string src = s.as_string();
      if (!src.empty() && (src[0] == '-' || src[0] == '+')) return Value::string(src.substr(0, 1) + rep(pad) + src.substr(1));
      return Value::string(rep(pad) + src);
    });
  if (n == "partition" || n == "rpartition")
    return bind_method(obj, n, [n](const Value& s, A& a) {
      std::string sep = str_arg(a, 0, "sep", n.c_str());
      if (sep.empty()) throw NativeError("empty separator");
      const std::string& src = s.as_string();
      size_t f = n == "partition" ? src.find(sep) : src.rfind(sep);
      if (f == std::string::npos) {
        if (n == "partition") return Value::list({s, Value::string(""), Value::string("")}, true);
        return Value::list({Value::string(""), Value::string(""), s}, true);
      }
      return Value::list({Value::string(src.substr(0, f)), Value::string(sep), Value::string(src.substr(f + sep.size()))}, true);
    });
  return Value::undefined("'str object' has no attribute '" + n + "'");
}

Value dict_method(const Value& obj, std::string_view name) {
  const std::string n(name);
  if (n == "items")
    return bind_method(obj, n, [](const Value& d, CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::list({k, v}, true));
      return Value::list(std::move(out));
    });
  if (n == "keys" || n == "values")
    return bind_method(obj, n, [n](const Value& d, CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d.as_dict().items) out.push_back(n == "keys" ? k : v);
      return Value::list(std::move(out));
    });
  if (n == "get")
    return bind_method(obj, n, [](const Value& d, CallArgs& a) {
      if (a.pos.empty()) throw NativeError("get expected at least 1 argument");
      if (const Value* v = d.as_dict().find(a.pos[0])) return *v;
      const Value* def = a.get(1, "default");
      return def ? *def : Value::none();
    });
  if (n == "copy")
    return bind_method(obj, n, [](const Value& d, CallArgs&) { return Value::dict(std::make_shared<Dict>(d.as_dict())); });
  return Value::undefined();
}

Value list_method(const Value& obj, std::string_view name) {
  const std::string n(name);
  if (n == "count")
    return bind_method(obj, n, [](const Value& l, CallArgs& a) {
      if (a.pos.empty()) throw NativeError("count() takes exactly one argument");
      int64_t c = 0;
      for (const auto& x : l.as_list()) c += py_equal(x, a.pos[0]);
      return Value::integer(c);
    });
  if (n == "index")
    return bind_method(obj, n, [](const Value& l, CallArgs& a) {
      if (a.pos.empty()) throw NativeError("index() takes at least one argument");
      for (size_t i = 0; i < l.as_list().size(); ++i)
        if (py_equal(l.as_list()[i], a.pos[0])) return Value::integer(static_cast<int64_t>(i));
      throw NativeError(py_repr(a.pos[0]) + " is not in list");
    });
  return Value::undefined();
}

}  // namespace

Value get_method(const Value& obj, std::string_view name) {
  if (obj.is_string()) {
    Value m = string_method(obj, name);
    return m.is_callable() ? m : Value::undefined();
  }
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return Value::undefined();
}

// ---- shared helpers -------------------------------------------------------------------------------

int64_t py_int_from_float(double x) {
  if (std::isnan(x)) throw NativeError("cannot convert float NaN to integer");
  if (std::isinf(x)) throw NativeError("cannot convert float infinity to integer");
  // [-2^63, 2^63) is exactly representable at both ends as doubles.
  if (x >= 9223372036854775808.0 || x < -9223372036854775808.0)
    throw NativeError("integer too large: " + py_str(Value::number(x)) + " does not fit in 64 bits");
  return static_cast<int64_t>(x);
}

bool is_py_space(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

std::string py_lower(std::string_view s) {
  auto cps = decode(s);
  for (auto& c : cps) c = lower_cp(c);
  return encode(cps);
}

std::string py_upper(std::string_view s) {
  auto cps = decode(s);
  for (auto& c : cps) c = upper_cp(c);
  return encode(cps);
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      ValueList keys;
      for (const auto& [k, x] : v.as_dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      auto offs = utf8_offsets(v.as_string());
      for (size_t i = 0; i + 1 < offs.size(); ++i)
        chars.push_back(Value::string(v.as_string().substr(offs[i], offs[i + 1] - offs[i])));
      return chars;
    }
    default: throw NativeError("'" + v.type_name() + "' object is not iterable");
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int();
    return a.to_double() < b.to_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw NativeError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool py_contains(const Value& c, const Value& x) {
  if (c.is_string()) {
    if (!x.is_string()) throw NativeError("'in <string>' requires string as left operand, not " + x.type_name());
    return c.as_string().find(x.as_string()) != std::string::npos;
  }
  if (c.is_mapping()) return c.as_dict().find(x) != nullptr;
  if (c.is_list()) {
    for (const auto& y : c.as_list())
      if (py_equal(x, y)) return true;
    return false;
  }
  if (c.is_undefined()) return false;
  throw NativeError("argument of type '" + c.type_name() + "' is not iterable");
}

std::string py_percent_format(const std::string& fmt, const Value& args) {
  ValueList list = args.is_tuple() ? args.as_list() : ValueList{args};
  size_t ai = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') { out += fmt[i]; continue; }
    size_t j = i + 1;
    std::string spec = "%";
    while (j < fmt.size() && std::string_view("-+ #0").find(fmt[j]) != std::string_view::npos) spec += fmt[j++];
    while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9') spec += fmt[j++];
    if (j < fmt.size() && fmt[j] == '.') {
      spec += fmt[j++];
      while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9') spec += fmt[j++];
    }
    if (j >= fmt.size()) throw NativeError("incomplete format");
    char conv = fmt[j];
    i = j;
    if (conv == '%') { out += '%'; continue; }
    if (ai >= list.size()) throw NativeError("not enough arguments for format string");
    const Value& v = list[ai++];
    if (spec.size() > 12) throw NativeError("format spec too long");
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? py_str(v) : py_repr(v);
      if (spec == "%") { out += s; continue; }
      std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number()) throw NativeError("%" + std::string(1, conv) + " format: a number is required, not " + v.type_name());
      long long x = v.is_float() ? py_int_from_float(v.as_float()) : v.as_int();
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), x);
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!v.is_number()) throw NativeError("must be real number, not " + v.type_name());
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.to_double());
    } else {
      throw NativeError(std::string("unsupported format character '") + conv + "'");
    }
    out += buf;
  }
  if (ai < list.size() && args.is_tuple()) throw NativeError("not all arguments converted during string formatting");
  return out;
}

}  // namespace clover::chat::jinja
