// The Jinja interpreter against Python jinja2 (fixtures from tools/chat_gen_fixtures.py): every
// case must render byte-identically, or fail where jinja2 fails. Plus clear errors, with line and
// column, for syntax the interpreter does not support.
#include <gtest/gtest.h>

#include "chat/jinja/template.h"
#include "fixtures_util.h"

namespace clover::chat::jinja {
namespace {

using testing::load_fixture;

TEST(JinjaConformance, MatchesPythonJinja2) {
  auto fx = load_fixture("jinja_conformance.json");
  ASSERT_GE(fx["cases"].size(), 150u);
  int failures = 0;
  for (const auto& c : fx["cases"]) {
    std::string name = c["name"];
    std::string status = c["status"];
    std::string out, err;
    bool threw = false, raised = false;
    try {
      Template t(c["template"].get<std::string>());
      out = t.render(c["context"]);
    } catch (const TemplateError& e) {
      threw = true;
      raised = e.raised;
      err = e.what();
    }
    if (status == "ok") {
      if (threw || out != c["output"].get<std::string>()) {
        ++failures;
        ADD_FAILURE() << name << "\n  template: " << c["template"].get<std::string>()
                      << "\n  expected: [" << c["output"].get<std::string>() << "]\n  got:      ["
                      << (threw ? "ERROR " + err : out) << "]";
      }
    } else {
      if (!threw) {
        ++failures;
        ADD_FAILURE() << name << ": jinja2 fails (" << c["message"].get<std::string>() << ") but we rendered [" << out
                      << "]";
      } else if (status == "raised") {
        EXPECT_TRUE(raised) << name;
        EXPECT_NE(err.find(c["message"].get<std::string>()), std::string::npos) << name << ": " << err;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Errors name the line and column of the offending construct.
TEST(JinjaErrors, CarryLineAndColumn) {
  try {
    Template t("line one\n{% if true %}\n  {{ 1 + }}\n{% endif %}");
    FAIL() << "expected a syntax error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line, 3);
    EXPECT_GT(e.column, 1);
  }
  try {
    Template t("a\nb {{ x.y.z }}");
    t.render(nlohmann::ordered_json{{"x", nlohmann::ordered_json::object()}});
    FAIL() << "expected an undefined error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line, 2);
    EXPECT_FALSE(e.raised);
  }
  try {
    Template t("{% if x %}\n{{ raise_exception('bad input') }}{% endif %}");
    t.render(nlohmann::ordered_json{{"x", true}});
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised);
    EXPECT_EQ(e.message, "bad input");
    EXPECT_EQ(e.line, 2);
  }
}

TEST(JinjaErrors, UnsupportedSyntaxIsClear) {
  const char* cases[] = {
      "{% include 'other.jinja' %}", "{% extends 'base' %}", "{% block body %}x{% endblock %}",
      "{% import 'm' as m %}", "{% from 'm' import x %}", "{% do x.append(1) %}",
      "{% for x in xs recursive %}{{ loop(x) }}{% endfor %}", "{{ f(*args) }}", "{{ f(**kw) }}",
      "{% autoescape true %}x{% endautoescape %}", "{{ x[:, 2] }}",
  };
  for (const char* src : cases) {
    try {
      Template t(src);
      ADD_FAILURE() << "accepted: " << src;
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.line, 1) << src;
      EXPECT_FALSE(e.message.empty());
    }
  }
}

TEST(JinjaLimits, HostileTemplatesFailCleanly) {
  const char* cases[] = {
      "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",                     // unbounded recursion
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",  // step budget
      "{{ 'x' * 1000000000 }}",                                               // huge string
      "{{ range(1000000000)|list }}",                                         // sandbox MAX_RANGE
  };
  TemplateOptions opt;
  opt.limits.max_steps = 200'000;
  for (const char* src : cases) {
    Template t(src, opt);
    EXPECT_THROW(t.render(nlohmann::ordered_json::object()), TemplateError) << src;
  }
  std::string deep(500, '(');
  EXPECT_THROW(Template("{{ " + deep + "1" + std::string(500, ')') + " }}"), TemplateError);
}

// A float too large for int64 where an integer is wanted is an error naming the value, never a
// wrapped (undefined) conversion: the fuzzer found batch(1.9e124); int and %d take the same path.
TEST(JinjaLimits, HugeFloatsAsIntegersFailCleanly) {
  const char* cases[] = {
      "{{ range(5)|batch(1888888888888888888888888888888888888888888888888888.0, 'x') }}",
      "{{ range(5)|batch(18888888888888888888888888888888888888888888888888888, 'x') }}",
      "{{ 1e300|int }}",
      "{{ '%d' % 1e30 }}",
      "{{ '%d' % (1e308 * 10) }}",
  };
  for (const char* src : cases) {
    try {
      Template t(src);
      t.render(nlohmann::ordered_json::object());
      ADD_FAILURE() << "accepted: " << src;
    } catch (const TemplateError& e) {
      EXPECT_FALSE(e.message.empty()) << src;
    }
  }
  Template ok("{{ 2.9|int }} {{ -2.9|int }} {{ '%d' % 7.5 }} {{ range(5)|batch(2.0)|list|length }}");
  EXPECT_EQ(ok.render(nlohmann::ordered_json::object()), "2 -2 7 3");
}

TEST(JinjaOptions, WithoutTrimAndLstrip) {
  TemplateOptions opt;
  opt.lexer.trim_blocks = false;
  opt.lexer.lstrip_blocks = false;
  Template t("  {% if true %}\nx\n  {% endif %}\n", opt);
  EXPECT_EQ(t.render(nlohmann::ordered_json::object()), "  \nx\n  ");
}

}  // namespace
}  // namespace clover::chat::jinja
