// The chat template engine's limits (tokenizer/jinja_limits.h): whatever a
// template's text or its variables say, parsing and rendering end with an
// exactly::Error naming the limit — never a stack overflow, an exhausted
// memory or a render without end — and what stays within the limits still
// renders as jinja2 does.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_limits.h"

namespace exactly {
namespace {

std::string render(const std::string& text) { return ChatTemplate::parse(text).render(nlohmann::ordered_json::object()); }

// The message of the exactly::Error thrown while parsing and rendering, or "" if none.
std::string error_of(const std::string& text) {
  try {
    render(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaLimits, ParenthesesUnaryOperatorsAndBlocksNestBoundedly) {
  const int deep = 100000, fine = 50;
  EXPECT_NE(error_of("{{ " + repeated("(", deep) + "1" + repeated(")", deep) + " }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeated("not ", deep) + "1 }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeated("-", deep) + "1 }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of(repeated("{% if true %}", deep) + "x" + repeated("{% endif %}", deep)).find("nest"),
            std::string::npos);
  EXPECT_EQ(render("{{ " + repeated("(", fine) + "1" + repeated(")", fine) + " }}"), "1");
  EXPECT_EQ(render("{{ " + repeated("-", fine) + "1 }}"), "1");  // 50 negations
  EXPECT_EQ(render(repeated("{% if true %}", fine) + "x" + repeated("{% endif %}", fine)), "x");
}

TEST(JinjaLimits, LongOperatorAndFilterChainsAreBoundedInHeight) {
  // Built by loops, not recursion, but evaluated and freed recursively.
  EXPECT_NE(error_of("{{ 1" + repeated(" + 1", 100000) + " }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a'" + repeated("|string", 100000) + " }}").find("nest"), std::string::npos);
  EXPECT_NE(error_of("{{ x" + repeated(".a", 100000) + " }}").find("nest"), std::string::npos);
  EXPECT_EQ(render("{{ 1" + repeated(" + 1", 99) + " }}"), "100");
}

TEST(JinjaLimits, MacrosThatRecurseWithoutEndAreStopped) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nests more than"),
            std::string::npos);
  // Recursion that ends (a schema printed level by level) still works.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) }}"),
            "2019181716151413121110987654321");
}

TEST(JinjaLimits, ValuesBuiltByATemplateNestBoundedly) {
  const std::string deep =
      "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}";
  EXPECT_NE(error_of(deep).find("nests more than 256"), std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}"
                   "{{ ns.x|length }}"),
            "1");
}

TEST(JinjaLimits, NamespacesCannotHoldNamespaces) {
  // A namespace holding itself would be a cycle of shared pointers, never freed.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}").find("namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.l = [1, [ns]] %}").find("namespace"), std::string::npos);
  EXPECT_NE(error_of("{% set a = namespace() %}{% set b = namespace(a=a) %}").find("namespace"), std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}"
                   "{{ ns.n }}{{ [namespace()]|length }}"),
            "31");
}

TEST(JinjaLimits, StringsAndListsAreBoundedBeforeTheyAreBuilt) {
  EXPECT_NE(error_of("{{ 'x' * 1000000000000 }}").find("string of more than"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 1000000000000 }}").find("list of more than"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                     "{% endfor %}")
                .find("string of more than"),
            std::string::npos);
  EXPECT_NE(error_of("{{ ('x' * 1000000).replace('', 'y' * 100) }}").find("string of more than"), std::string::npos);
  EXPECT_NE(error_of("{{ ['y' * 100000] * 1000 }}").find("string of more than"), std::string::npos);
  EXPECT_NE(error_of("{{ 1|tojson(indent=1000000000) }}").find("indent"), std::string::npos);
  EXPECT_EQ(render("{{ ('ab' * 3).replace('', '-') }}"), "-a-b-a-b-a-b-");
}

TEST(JinjaLimits, IntegersOverflowIntoAnErrorNotUndefinedBehaviour) {
  EXPECT_EQ(render("{{ 2 ** 62 }}"), "4611686018427387904");
  EXPECT_NE(error_of("{{ 2 ** 63 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 3 ** 1000000000000000 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ (-9223372036854775807 - 1) // -1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ -(-9223372036854775807 - 1) }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 1e300|int }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ x.99999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
}

TEST(JinjaLimits, ARenderThatWouldRunForHoursIsStopped) {
  // 10^10 loop iterations: the work budget ends it.
  EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
                .find("more work than a render may"),
            std::string::npos);
}

TEST(JinjaLimits, IndexingALongStringInALoopIsCounted) {
  // Each index decodes the string into code points.
  EXPECT_NE(error_of("{% set s = 'x' * 10000000 %}{% for i in range(100000) %}{{ s[i] }}{% endfor %}")
                .find("more work than a render may"),
            std::string::npos);
}

}  // namespace
}  // namespace exactly
