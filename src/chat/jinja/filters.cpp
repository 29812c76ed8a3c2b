// Jinja filters, as jinja2 3.1 defines them, with HF's tojson (json.dumps, ensure_ascii=False, no
// HTML escaping, key order kept). Autoescaping is off in HF, so `safe` and `escape` return plain
// strings.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"

namespace clover::chat::jinja {

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

const Value* arg(const CallArgs& a, size_t i, std::string_view name) { return a.get(i, name); }
bool arg_bool(const CallArgs& a, size_t i, std::string_view name, bool def) {
  const Value* v = arg(a, i, name);
  return v ? v->truthy() : def;
}
int64_t arg_int(const CallArgs& a, size_t i, std::string_view name, int64_t def) {
  const Value* v = arg(a, i, name);
  if (!v || v->is_none() || v->is_undefined()) return def;
  if (v->is_float()) return py_int_from_float(v->as_float());
  if (!v->is_int() && !v->is_bool()) throw NativeError("expected an integer argument '" + std::string(name) + "'");
  return v->as_int();
}
std::string arg_str(const CallArgs& a, size_t i, std::string_view name, std::string def) {
  const Value* v = arg(a, i, name);
  if (!v || v->is_undefined()) return def;
  return py_str(*v);
}

// jinja2's attribute lookup for map/sort/...: "a.b.0" walks attributes and integer indices.
Value resolve_attribute(const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find('.', b);
    if (e == std::string::npos) e = path.size();
    std::string part = path.substr(b, e - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits ? get_item(cur, Value::integer(std::atoll(part.c_str()))) : get_item(cur, Value::string(part));
    b = e + 1;
  }
  return cur;
}

// Sort key with jinja2's case_sensitive=False default: strings compare lowercased.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.as_string()));
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
  if (v.is_list()) return Value::integer(static_cast<int64_t>(v.as_list().size()));
  if (v.is_mapping()) return Value::integer(static_cast<int64_t>(v.as_dict().items.size()));
  if (v.is_undefined()) return Value::integer(0);
  throw NativeError("object of type '" + v.type_name() + "' has no len()");
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  const Value* ind = arg(a, 1, "indent");
  if (ind && !ind->is_none()) {
    if (!ind->is_int()) throw NativeError("tojson: indent must be an integer");
    o.indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), 0, 64));
  }
  const Value* seps = arg(a, 2, "separators");
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->as_list().size() != 2) throw NativeError("tojson: separators must be a pair");
    o.separators = std::make_pair(py_str(seps->as_list()[0]), py_str(seps->as_list()[1]));
  }
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  try {
    return Value::string(py_json_dumps(v, o));
  } catch (const NativeError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw NativeError(e.what());
  }
}

Value call_str_method(Interpreter& in, const std::string& s, const char* name, CallArgs& a) {
  Value m = get_method(Value::string(s), name);
  return m.as_callable().fn(in, a);
}

Value f_trim(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs sa;
  if (const Value* c = arg(a, 0, "chars")) sa.pos.push_back(*c);
  return call_str_method(in, py_str(v), "strip", sa);
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_mapping()) throw NativeError("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_str(v)); }
Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined() ? Value::string("") : v; }

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) {
    const Value* d = arg(a, 0, "default_value");
    return d ? *d : Value::string("");
  }
  return v;
}

Value f_join(Interpreter&, const Value& v, CallArgs& a) {
  std::string sep = arg_str(a, 0, "d", "");
  const Value* attr = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(attr && !attr->is_none() ? resolve_attribute(x, py_str(*attr)) : x);
  }
  return Value::string(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}
Value f_last(Interpreter&, const Value& v, CallArgs&) {
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}
Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::list(iterate(v)); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_upper(py_str(v))); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_lower(py_str(v))); }

Value f_capitalize(Interpreter& in, const Value& v, CallArgs& a) { return call_str_method(in, py_str(v), "capitalize", a); }
Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs c;
  c.pos.push_back(Value::integer(arg_int(a, 0, "width", 80)));
  return call_str_method(in, py_str(v), "center", c);
}
Value f_title(Interpreter&, const Value& v, CallArgs&) {
  // jinja2: words split at runs of whitespace, '-', '(', '{', '[', '<'.
  std::string s = py_str(v), out;
  auto is_sep = [](char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == '-' || c == '(' || c == '{' ||
           c == '[' || c == '<';
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (is_sep(s[i])) {
      while (j < s.size() && is_sep(s[j])) ++j;
      out += s.substr(i, j - i);
    } else {
      while (j < s.size() && !is_sep(s[j])) ++j;
      std::string w = s.substr(i, j - i);
      auto offs = utf8_offsets(w);
      out += py_upper(w.substr(0, offs[1])) + py_lower(w.substr(offs[1]));
    }
    i = j;
  }
  return Value::string(std::move(out));
}
Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs c;
  c.pos.push_back(Value::string(arg_str(a, 0, "old", "")));
  c.pos.push_back(Value::string(arg_str(a, 1, "new", "")));
  if (const Value* n = arg(a, 2, "count"); n && !n->is_none()) c.pos.push_back(*n);
  return call_str_method(in, py_str(v), "replace", c);
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  int64_t def = arg_int(a, 0, "default", 0);
  int64_t base = arg_int(a, 1, "base", 10);
  if (v.is_undefined()) throw NativeError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) return std::isfinite(v.as_float()) ? Value::integer(py_int_from_float(v.as_float())) : Value::integer(def);
  if (v.is_string()) {
    std::string s = v.as_string();
    size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
    if (b == std::string::npos) return Value::integer(def);
    s = s.substr(b, e - b + 1);
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(s.c_str(), &end, static_cast<int>(base));
    if (end == s.c_str() + s.size() && errno == 0) return Value::integer(x);
    double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
  }
  return Value::integer(def);
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  Value def = d ? *d : Value::number(0.0);
  if (v.is_undefined()) throw NativeError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is_string()) {
    std::string s = v.as_string();
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value::number(x);
  }
  return def;
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return v.as_int() < 0 && v.as_int() > INT64_MIN ? Value::integer(-v.as_int()) : Value::integer(v.as_int());
  throw NativeError("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_number()) throw NativeError("round: a number is required");
  if ((v.is_int() || v.is_bool()) && arg_str(a, 1, "method", "common") == "common") return Value::integer(v.as_int());
  int64_t precision = arg_int(a, 0, "precision", 0);
  std::string method = arg_str(a, 1, "method", "common");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.to_double() * scale;
  double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  if (method == "common" && std::fabs(x - std::trunc(x)) != 0.5) r = std::round(x);
  return Value::number(r / scale);
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) return slice_value(v, Value::none(), Value::none(), Value::integer(-1));
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_sort(Interpreter&, const Value& v, CallArgs& a) {
  bool reverse = arg_bool(a, 0, "reverse", false);
  bool cs = arg_bool(a, 1, "case_sensitive", false);
  const Value* attr = arg(a, 2, "attribute");
  ValueList items = iterate(v);
  auto key = [&](const Value& x) {
    return sort_key(attr && !attr->is_none() ? resolve_attribute(x, py_str(*attr)) : x, cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? py_less(key(y), key(x)) : py_less(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_mapping()) throw NativeError("dictsort: a mapping is required");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::string by = arg_str(a, 1, "by", "key");
  bool reverse = arg_bool(a, 2, "reverse", false);
  int idx = by == "value" ? 1 : 0;
  ValueList items;
  for (const auto& [k, x] : v.as_dict().items) items.push_back(Value::list({k, x}, true));
  std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
    Value kp = sort_key(p.as_list()[idx], cs), kq = sort_key(q.as_list()[idx], cs);
    return reverse ? py_less(kq, kp) : py_less(kp, kq);
  });
  return Value::list(std::move(items));
}

Value f_unique(Interpreter&, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  ValueList out, seen;
  for (const auto& x : iterate(v)) {
    Value k = sort_key(attr && !attr->is_none() ? resolve_attribute(x, py_str(*attr)) : x, cs);
    bool dup = false;
    for (const auto& s : seen)
      if (py_equal(s, k)) { dup = true; break; }
    if (!dup) { seen.push_back(k); out.push_back(x); }
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) { return sort_key(attr && !attr->is_none() ? resolve_attribute(x, py_str(*attr)) : x, cs); };
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i)
    if (want_max ? py_less(key(best), key(items[i])) : py_less(key(items[i]), key(best))) best = items[i];
  return best;
}
Value f_min(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, false); }
Value f_max(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, true); }

Value f_sum(Interpreter&, const Value& v, CallArgs& a) {
  const Value* attr = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const auto& x : iterate(v)) total = binary_op("+", total, attr && !attr->is_none() ? resolve_attribute(x, py_str(*attr)) : x);
  return total;
}

// select/reject/selectattr/rejectattr: args are [attr,] test name, test args.
Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  size_t i = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) throw NativeError("Missing parameter for attribute name");
    attr = py_str(a.pos[i++]);
  }
  std::string test;
  CallArgs targs;
  if (i < a.pos.size()) {
    test = py_str(a.pos[i++]);
    if (!has_test(test)) throw NativeError("No test named '" + test + "'.");
    targs.pos.assign(a.pos.begin() + i, a.pos.end());
    targs.kw = a.kw;
  }
  ValueList out;
  for (const auto& x : iterate(v)) {
    in.count_step();
    Value subject = by_attr ? resolve_attribute(x, attr) : x;
    CallArgs copy = targs;
    bool ok = test.empty() ? subject.truthy() : apply_test(in, test, subject, copy);
    if (ok == keep_if) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  ValueList out;
  if (const Value* attr = a.get_kw("attribute")) {
    const Value* def = a.get_kw("default");
    for (const auto& x : iterate(v)) {
      Value r = resolve_attribute(x, py_str(*attr));
      out.push_back(r.is_undefined() && def ? *def : r);
    }
    return Value::list(std::move(out));
  }
  if (a.pos.empty()) throw NativeError("map requires a filter argument");
  std::string name = py_str(a.pos[0]);
  if (!has_filter(name)) throw NativeError("No filter named '" + name + "'.");
  for (const auto& x : iterate(v)) {
    CallArgs fa;
    fa.pos.assign(a.pos.begin() + 1, a.pos.end());
    fa.kw = a.kw;
    out.push_back(apply_filter(in, name, x, fa));
  }
  return Value::list(std::move(out));
}

// Python attributes only (methods, namespace attributes), never dict keys.
Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
  std::string name = arg_str(a, 0, "name", "");
  if (v.is_undefined()) throw NativeError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
  if (v.is_namespace()) {
    const Value* x = v.as_dict().find(name);
    return x ? *x : Value::undefined();
  }
  return get_method(v, name);
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) throw NativeError(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
  const Value* w = arg(a, 0, "width");
  std::string pad = w && w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(arg_int(a, 0, "width", 4), 0, 256)), ' ');
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  std::string s = py_str(v), out;
  // jinja2 splits with str.splitlines(): a trailing newline does not start a new line.
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '\n') {
      if (i < s.size() || b < s.size()) lines.push_back(s.substr(b, i - b));
      b = i + 1;
    }
  bool trailing_nl = !s.empty() && s.back() == '\n';
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    bool do_pad = (i > 0 || first) && (blank || !lines[i].empty());
    if (do_pad) out += pad;
    out += lines[i];
  }
  if (trailing_nl) out += '\n';
  return Value::string(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string s = py_str(v), out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  if (!a.kw.empty()) throw NativeError("format: keyword arguments are not supported");
  return Value::string(py_percent_format(py_str(v), Value::list(a.pos, true)));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : py_str(v)) {
    bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || (c & 0x80);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

// pprint.pformat sorts dict keys (it does not wrap short values, which is all templates print).
Value sorted_dicts(const Value& v, int depth) {
  if (depth > 100) return v;
  if (v.is_list()) {
    ValueList items;
    for (const auto& x : v.as_list()) items.push_back(sorted_dicts(x, depth + 1));
    return Value::list(std::move(items), v.is_tuple());
  }
  if (v.is_dict()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, x] : v.as_dict().items) d->items.emplace_back(k, sorted_dicts(x, depth + 1));
    std::stable_sort(d->items.begin(), d->items.end(), [](const auto& a, const auto& b) { return py_less(a.first, b.first); });
    return Value::dict(d);
  }
  return v;
}
Value f_pprint(Interpreter&, const Value& v, CallArgs&) { return Value::string(py_repr(sorted_dicts(v, 0))); }

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
  int64_t n = arg_int(a, 0, "linecount", 1);
  if (n <= 0) throw NativeError("batch: linecount must be positive");
  const Value* fill = arg(a, 1, "fill_with");
  ValueList out, cur;
  for (const auto& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) { out.push_back(Value::list(std::move(cur))); cur.clear(); }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> m = {
      {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"forceescape", f_escape}, {"format", f_format},
      {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last},
      {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
      {"pprint", f_pprint}, {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
      {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum}, {"title", f_title},
      {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
  };
  return m;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) > 0; }

namespace {

// jinja2's parameter lists (after the input), for argument checking as Python does it; filters
// taking *args/**kwargs (format, map, select, ...) are not listed. The first `required` are required.
struct Signature {
  std::vector<std::string_view> params;
  size_t required = 0;
};

const std::map<std::string, Signature, std::less<>>& signatures() {
  static const std::map<std::string, Signature, std::less<>> m = {
      {"abs", {}}, {"attr", {{"name"}, 1}}, {"batch", {{"linecount", "fill_with"}, 1}}, {"capitalize", {}},
      {"center", {{"width"}}}, {"count", {}}, {"d", {{"default_value", "boolean"}}},
      {"default", {{"default_value", "boolean"}}}, {"dictsort", {{"case_sensitive", "by", "reverse"}}},
      {"e", {}}, {"escape", {}}, {"first", {}}, {"float", {{"default"}}}, {"forceescape", {}},
      {"indent", {{"width", "first", "blank"}}}, {"int", {{"default", "base"}}}, {"items", {}},
      {"join", {{"d", "attribute"}}}, {"last", {}}, {"length", {}}, {"list", {}}, {"lower", {}},
      {"max", {{"case_sensitive", "attribute"}}}, {"min", {{"case_sensitive", "attribute"}}}, {"pprint", {}},
      {"replace", {{"old", "new", "count"}, 2}}, {"reverse", {}}, {"round", {{"precision", "method"}}},
      {"safe", {}}, {"sort", {{"reverse", "case_sensitive", "attribute"}}}, {"string", {}},
      {"sum", {{"attribute", "start"}}}, {"title", {}},
      {"tojson", {{"ensure_ascii", "indent", "separators", "sort_keys"}}}, {"trim", {{"chars"}}},
      {"unique", {{"case_sensitive", "attribute"}}}, {"upper", {}}, {"wordcount", {}},
  };
  return m;
}

void check_signature(std::string_view name, const CallArgs& a) {
  auto it = signatures().find(name);
  if (it == signatures().end()) return;
  const Signature& sig = it->second;
  std::string fn = "do_" + std::string(name) + "()";
  if (a.pos.size() > sig.params.size())
    throw NativeError(fn + " takes " + std::to_string(sig.params.size() + 1) + " positional arguments but " +
                      std::to_string(a.pos.size() + 1) + " were given");
  for (const auto& [k, v] : a.kw) {
    auto p = std::find(sig.params.begin(), sig.params.end(), k);
    if (p == sig.params.end()) throw NativeError(fn + " got an unexpected keyword argument '" + k + "'");
    if (static_cast<size_t>(p - sig.params.begin()) < a.pos.size())
      throw NativeError(fn + " got multiple values for argument '" + k + "'");
  }
  for (size_t i = a.pos.size(); i < sig.required; ++i)
    if (!a.get_kw(sig.params[i])) throw NativeError(fn + " missing required argument '" + std::string(sig.params[i]) + "'");
}

}  // namespace

Value apply_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw NativeError("No filter named '" + std::string(name) + "'.");
  check_signature(name, args);
  return it->second(in, input, args);
}

}  // namespace clover::chat::jinja
