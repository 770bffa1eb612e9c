// Chat template engine: lexer whitespace control, parser precedence and
// errors, evaluator semantics. Expected strings are what Python's jinja2
// (trim_blocks=True, lstrip_blocks=True, as Hugging Face configures it) prints
// for the same template; tests/e2e/test_chat_template.py compares real
// templates against jinja2 itself.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/jinja_lexer.h"

namespace exactly {
namespace {

std::string render(const std::string& text, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  return ChatTemplate::parse(text).render(vars);
}

// The message of the exactly::Error thrown while parsing and rendering, or "" if none.
std::string error_of(const std::string& text, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  try {
    render(text, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaLexer, SplitsTextAndTags) {
  auto tokens = jinja::lex_template("a{{ x }}b{% if y %}c");
  std::vector<jinja::TokenKind> kinds;
  for (const auto& t : tokens) kinds.push_back(t.kind);
  using K = jinja::TokenKind;
  EXPECT_EQ(kinds, (std::vector<K>{K::kText, K::kVarBegin, K::kName, K::kVarEnd, K::kText, K::kBlockBegin, K::kName,
                                   K::kName, K::kBlockEnd, K::kText, K::kEnd}));
  EXPECT_EQ(tokens[5].where.line, 1);
  EXPECT_EQ(tokens[5].where.column, 10);
}

TEST(JinjaLexer, StringEscapesFollowPython) {
  auto tokens = jinja::lex_template(R"({{ 'a\nb\t\'q\' \u00e9 \d' }})");
  ASSERT_EQ(tokens[1].kind, jinja::TokenKind::kString);
  EXPECT_EQ(tokens[1].value, "a\nb\t'q' \xC3\xA9 \\d");
}

TEST(JinjaWhitespace, TrimBlocksDropsNewlineAfterBlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
}

TEST(JinjaWhitespace, LstripBlocksDropsIndentBeforeBlockTagOnly) {
  EXPECT_EQ(render("x\n    {% if true %}\n  y\n    {% endif %}\n"), "x\n  y\n");
  // Indentation before {{ is kept, and so is text before a tag on the same line.
  EXPECT_EQ(render("  {{ 1 }}\nab  {% if true %}c{% endif %}"), "  1\nab  c");
}

TEST(JinjaWhitespace, MinusStripsAllWhitespaceAndPlusKeepsIt) {
  EXPECT_EQ(render("a  \n  {{- 1 -}}  \n  b"), "a1b");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a {#- comment -#} b"), "ab");
}

TEST(JinjaWhitespace, OneTrailingNewlineOfTheTemplateIsDropped) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(JinjaExpressions, PrecedenceMatchesJinja) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"), "7 9 64 4");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 1 ~ 2 * 3 }}"), "3 -4 2 3.5 16");
  // A filter binds tighter than +.
  EXPECT_EQ(render("{{ ' a ' | trim + 'b' }}"), "ab");
  EXPECT_EQ(render("{{ 'x' if false }}|{{ 'y' if 1 > 2 else 'z' }}"), "|z");
  EXPECT_EQ(render("{{ not 1 in [1] }} {{ 1 not in [1] }} {{ 1 < 2 < 3 }} {{ 0 or 'd' }} {{ 1 and 2 }}"),
            "False False True d 2");
}

TEST(JinjaExpressions, ValuesPrintLikePython) {
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ [1, 'a', none] }}"),
            "None True 1.0 0.30000000000000004 1e+20 [1, 'a', None]");
  EXPECT_EQ(render("{{ {'k': \"it's\", 'n': [true]} }}"), "{'k': \"it's\", 'n': [True]}");
  EXPECT_EQ(render("[{{ missing }}]"), "[]");
}

TEST(JinjaExpressions, SubscriptsSlicesAndMethods) {
  nlohmann::ordered_json vars = {{"m", {{"role", "user"}, {"content", "  héllo world  "}}}, {"xs", {1, 2, 3, 4}}};
  EXPECT_EQ(render("{{ m['role'] }} {{ m.role }} {{ xs[-1] }} {{ xs[::-1] }} {{ xs[1:3] }} {{ xs[5] }}", vars),
            "user user 4 [4, 3, 2, 1] [2, 3] ");
  EXPECT_EQ(render("{{ m.content.strip() }}|{{ m.content.split() }}|{{ m.content.strip()[::-1] }}", vars),
            "héllo world|['héllo', 'world']|dlrow olléh");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'Hi'.upper() }}"),
            "['a', 'b', '', 'c'] True HI");
  EXPECT_EQ(render("{% for k, v in m.items() %}{{ k }}={{ v | length }};{% endfor %}", vars), "role=4;content=15;");
  EXPECT_EQ(render("{{ m.get('nope', 'dflt') }} {{ m.keys() | list }}", vars), "dflt ['role', 'content']");
}

TEST(JinjaFilters, CommonFilters) {
  nlohmann::ordered_json vars = {
      {"msgs", {{{"role", "user"}, {"n", 1}}, {{"role", "assistant"}, {"n", 2}}, {{"role", "user"}, {"n", 3}}}}};
  EXPECT_EQ(render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='n') | join(',') }}", vars), "1,3");
  EXPECT_EQ(render("{{ msgs | rejectattr('role', 'equalto', 'user') | list | length }}", vars), "1");
  EXPECT_EQ(render("{{ (msgs | first).role }} {{ (msgs | last).n }} {{ x | default('d') }} {{ '' | default('e', true) }}",
                   vars),
            "user 3 d e");
  EXPECT_EQ(render("{{ 'hello wORLD' | title }} {{ 'aBC' | capitalize }} {{ '42' | int + 1 }} {{ 'x' | int }}"),
            "Hello World Abc 43 0");
  EXPECT_EQ(render("{{ 'aaa' | replace('a', 'b') }} {{ [3, 1] | string }} {{ 'ab' | list }}"), "bbb [3, 1] ['a', 'b']");
}

TEST(JinjaFilters, ToJsonMatchesPythonJsonDumps) {
  nlohmann::ordered_json vars = {{"t", {{"name", "f"}, {"q", "\"é\"\n"}, {"a", {1, 2.5, true, nullptr}}, {"o", nlohmann::ordered_json::object()}}}};
  EXPECT_EQ(render("{{ t | tojson }}", vars), R"({"name": "f", "q": "\"é\"\n", "a": [1, 2.5, true, null], "o": {}})");
  EXPECT_EQ(render("{{ t.a | tojson(indent=2) }}", vars), "[\n  1,\n  2.5,\n  true,\n  null\n]");
}

TEST(JinjaStatements, LoopVariablesElseBreakContinue) {
  EXPECT_EQ(render("{% for x in [5, 6, 7] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }} {% endfor %}"),
            "103TrueFalse3 212FalseFalse3 321FalseTrue3 ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(render("{% for x in range(6) if x is even %}{{ x }}{% endfor %}"), "024");
}

TEST(JinjaStatements, SetScopesAndNamespace) {
  // set inside a loop does not leak; namespace attributes do.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i * 10 %}{{ x }}{% endfor %}{{ x }}"), "10201");
  EXPECT_EQ(render("{% set ns = namespace(count=0) %}{% for i in [1, 2, 3] %}{% set ns.count = ns.count + i %}"
                   "{% endfor %}{{ ns.count }}"),
            "6");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}in {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[in 2]");
  EXPECT_EQ(render("{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}{{ greet('a') }} "
                   "{{ greet('b', punct='?') }}"),
            "Hi a! Hi b?");
}

TEST(JinjaStatements, TestsOnValues) {
  nlohmann::ordered_json vars = {{"s", "x"}, {"d", {{"k", 1}}}, {"n", nullptr}, {"i", 3}};
  EXPECT_EQ(render("{{ s is string }}{{ d is mapping }}{{ n is none }}{{ i is number }}{{ zz is defined }}"
                   "{{ zz is not defined }}{{ d is iterable }}{{ i is iterable }}{{ s is sequence }}{{ i is odd }}"
                   "{{ i is divisibleby 3 }}",
                   vars),
            "TrueTrueTrueTrueFalseTrueTrueFalseTrueTrueTrue");
}

TEST(JinjaStatements, StrftimeNowUsesTheGivenTime) {
  std::tm now{};
  now.tm_year = 2024 - 1900;
  now.tm_mon = 6;
  now.tm_mday = 26;
  ChatTemplate::Options options;
  options.now = now;
  EXPECT_EQ(ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}").render(nlohmann::ordered_json::object(), options),
            "26 Jul 2024");
}

TEST(JinjaErrors, UnknownTagNamesTagAndPosition) {
  std::string e = error_of("ok\n  {% frobnicate %}");
  EXPECT_NE(e.find("unknown tag 'frobnicate'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2, column 6"), std::string::npos) << e;
}

TEST(JinjaErrors, UnclosedBlockNamesWhereItOpened) {
  std::string e = error_of("a\nb {% for x in y %}\n{{ x }}");
  EXPECT_NE(e.find("unclosed 'for'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2, column 6"), std::string::npos) << e;
  EXPECT_NE(error_of("{% if x %}a{% endfor %}").find("unexpected 'endfor'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("{{ x ").find("unclosed expression"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionMessageIsSurfacedWithLine) {
  std::string e = error_of("line one\n{{ raise_exception('Roles must alternate') }}");
  EXPECT_NE(e.find("Roles must alternate"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
}

TEST(JinjaErrors, UndefinedMisuseAndTypeErrors) {
  EXPECT_NE(error_of("{{ nope.attr }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + 'a' }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(error_of("{{ x | nofilter }}").find("no filter named 'nofilter'"), std::string::npos);
}

TEST(ChatTemplateApi, RendersMessagesWithTokens) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ tools | length }}";
  nlohmann::json messages = {{{"role", "user"}, {"content", "{{ not evaluated }}"}}};
  EXPECT_EQ(render_chat_template(tmpl, messages, true, "<s>", "</s>"),
            "<s><user>{{ not evaluated }}</s><assistant>0");
  EXPECT_EQ(render_chat_template(tmpl, messages, false, "", "", {{"tools", {1, 2}}}), "<user>{{ not evaluated }}2");
}

// Values from JSON are converted by recursion, so their depth is bounded: a
// message nested past the limit is refused with an error, not a stack overflow.
TEST(ChatTemplate, DeeplyNestedMessagesAreRefused) {
  const std::string tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto nested = [](int depth) {  // built by moves: a copy of a deep value recurses once per level
    nlohmann::json j = nlohmann::json::array();
    for (int i = 0; i < depth; ++i) {
      nlohmann::json outer = nlohmann::json::array();
      outer.push_back(std::move(j));
      j = std::move(outer);
    }
    return j;
  };
  nlohmann::json deep = nested(100000);
  nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
  messages[0]["extra"] = std::move(deep);
  EXPECT_THROW(render_chat_template(tmpl, messages, false, "", ""), Error);
  messages[0]["extra"] = nested(200);
  EXPECT_EQ(render_chat_template(tmpl, messages, false, "", ""), "hi");
}

}  // namespace
}  // namespace exactly
