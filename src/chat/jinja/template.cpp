#include "chat/jinja/template.h"

#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/parser.h"

namespace clover::chat::jinja {

namespace {

Value native(std::string name, NativeFn fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value::callable(c);
}

std::shared_ptr<Scope> make_globals(const TemplateOptions& opt) {
  auto g = std::make_shared<Scope>();
  g->set("raise_exception", native("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
           throw NativeError(a.pos.empty() ? std::string() : py_str(a.pos[0]), true);
         }));
  auto now = opt.now;
  g->set("strftime_now", native("strftime_now", [now](Interpreter&, CallArgs& a) {
           if (a.pos.empty() || !a.pos[0].is_string()) throw NativeError("strftime_now() needs a format string");
           std::time_t t = now ? static_cast<std::time_t>(now()) : std::time(nullptr);
           std::tm tm{};
           localtime_r(&t, &tm);
           char buf[512];
           size_t n = std::strftime(buf, sizeof buf, a.pos[0].as_string().c_str(), &tm);
           return Value::string(std::string(buf, n));
         }));
  g->set("namespace", native("namespace", [](Interpreter& in, CallArgs& a) {
           auto d = std::make_shared<Dict>();
           for (const auto& p : a.pos) {
             if (!p.is_dict()) throw NativeError("namespace() positional argument must be a dict");
             for (const auto& [k, v] : p.as_dict().items) d->set(k, v);
           }
           for (const auto& [k, v] : a.kw) d->set(k, v);
           in.track_namespace(d);
           return Value::namespace_(d);
         }));
  g->set("dict", native("dict", [](Interpreter&, CallArgs& a) {
           auto d = std::make_shared<Dict>();
           for (const auto& p : a.pos) {
             if (!p.is_dict()) throw NativeError("dict() positional argument must be a dict");
             for (const auto& [k, v] : p.as_dict().items) d->set(k, v);
           }
           for (const auto& [k, v] : a.kw) d->set(k, v);
           return Value::dict(d);
         }));
  g->set("range", native("range", [](Interpreter&, CallArgs& a) {
           int64_t r[3] = {0, 0, 1};
           if (a.pos.empty() || a.pos.size() > 3) throw NativeError("range expected 1 to 3 arguments");
           for (size_t i = 0; i < a.pos.size(); ++i)
             if (!a.pos[i].is_int() && !a.pos[i].is_bool()) throw NativeError("range() arguments must be integers");
           if (a.pos.size() == 1) r[1] = a.pos[0].as_int();
           else for (size_t i = 0; i < a.pos.size(); ++i) r[i] = a.pos[i].as_int();
           if (r[2] == 0) throw NativeError("range() arg 3 must not be zero");
           ValueList out;
           for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1]; i += r[2]) {
             if (out.size() >= 100000) throw NativeError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
             out.push_back(Value::integer(i));
             if (__builtin_add_overflow(i, r[2], &i)) break;
             i -= r[2];
           }
           return Value::list(std::move(out));
         }));
  g->set("joiner", native("joiner", [](Interpreter&, CallArgs& a) {
           std::string sep = a.pos.empty() ? ", " : py_str(a.pos[0]);
           auto used = std::make_shared<bool>(false);
           return native("joiner", [sep, used](Interpreter&, CallArgs&) {
             if (!*used) { *used = true; return Value::string(""); }
             return Value::string(sep);
           });
         }));
  return g;
}

}  // namespace

struct Template::Impl {
  TemplateOptions opt;
  std::string source;
  Body body;
  std::shared_ptr<Scope> globals;
};

Template::Template(std::string_view source, TemplateOptions opt) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(opt);
  impl_->source = normalize_source(source, impl_->opt.lexer);
  impl_->body = parse(tokenize(impl_->source, impl_->opt.lexer), impl_->source);
  impl_->globals = make_globals(impl_->opt);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

const std::string& Template::source() const { return impl_->source; }

std::string Template::render(const Value& context) const {
  Interpreter in(impl_->source, impl_->opt.limits);
  return in.render(impl_->body, context, impl_->globals);
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  return render(from_json(context.is_object() ? context : nlohmann::ordered_json::object()));
}

}  // namespace clover::chat::jinja
