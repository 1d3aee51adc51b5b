// Chat templates: the real templates of Qwen2.5, Qwen3, Phi-3 and Mistral v1 rendered through
// orzo's Jinja interpreter must equal HF transformers' apply_chat_template output byte for byte
// (tests/fixtures/chat, written by tools/make_chat_fixtures.py); small templates pin single
// constructs against jinja2; hostile templates must fail with ChatTemplateError, quickly.
#include "chat_template/chat_template.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "formats/gguf.hpp"

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

const std::string kShared = ORZO_SHARED_DIR;
const std::string kChatFixtures = std::string(ORZO_FIXTURES_DIR) + "/chat";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json(const std::string& path) { return Json::parse(read_file(path)); }

std::string template_source(const Json& ref) {
  const std::string path = kShared + "/" + ref.at("file").get<std::string>();
  if (ref.contains("json_key")) return read_json(path).at(ref.at("json_key").get<std::string>()).get<std::string>();
  return read_file(path);
}

// Renders one fixture case the way HF did: apply_chat_template with the tokenizer's special tokens.
std::string render_case(const ChatTemplate& tmpl, const Json& special, const Json& c) {
  Json extra = c.value("extra", Json::object());
  if (c.contains("tools")) extra["tools"] = c["tools"];
  for (const auto& [key, value] : special.items()) {
    if (key != "bos_token" && key != "eos_token") extra[key] = value;
  }
  return apply_chat_template(tmpl, c.at("messages"), c.at("add_generation_prompt").get<bool>(), special.value("bos_token", ""),
                             special.value("eos_token", ""), extra);
}

// Checks every case of a model fixture against `tmpl`; returns the number of cases checked.
int check_model_cases(const ChatTemplate& tmpl, const Json& fixture) {
  int checked = 0;
  for (const Json& c : fixture.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    if (c.contains("error")) {
      EXPECT_EQ(c.at("error"), "raise") << "only raise_exception failures are recorded for real templates";
      try {
        render_case(tmpl, fixture.at("special_tokens"), c);
        ADD_FAILURE() << "expected raise_exception: " << c.at("message");
      } catch (const ChatTemplateRaised& e) {
        EXPECT_EQ(e.what(), c.at("message").get<std::string>());
      }
    } else {
      EXPECT_EQ(render_case(tmpl, fixture.at("special_tokens"), c), c.at("expected").get<std::string>());
    }
    ++checked;
  }
  return checked;
}

class ChatTemplateFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTemplateFixture, RendersLikeTransformers) {
  const Json fixture = read_json(kChatFixtures + "/" + GetParam() + ".json");
  const ChatTemplate tmpl(template_source(fixture.at("template")));
  EXPECT_GE(check_model_cases(tmpl, fixture), 10);
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateFixture, ::testing::Values("qwen2.5", "qwen3", "phi-3", "mistral-v1"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '.' || c == '-') c = '_';
                           }
                           return name;
                         });

TEST(ChatTemplate, Phi3GgufCarriesTheSameTemplate) {
  const Json fixture = read_json(kChatFixtures + "/phi-3.json");
  const GgufFile gguf = read_gguf(kShared + "/" + fixture.at("template").at("same_as_gguf").get<std::string>());
  const std::string from_gguf = gguf.metadata.get_string("tokenizer.chat_template");
  EXPECT_EQ(from_gguf, template_source(fixture.at("template")));
  EXPECT_GE(check_model_cases(ChatTemplate(from_gguf), fixture), 10);
}

// Independent of HF: Mistral's own token-piece rendering of its sample conversation has the same
// characters once SentencePiece's word-boundary marks and spaces are set aside.
TEST(ChatTemplate, MistralSampleMatchesMistralReference) {
  const Json fixture = read_json(kChatFixtures + "/mistral-v1.json");
  const ChatTemplate tmpl(template_source(fixture.at("template")));
  const Json sample = read_json(kShared + "/models/tokenizers/mistral-v1/chat_sample_no_tools/sample.json");
  const std::string rendered = apply_chat_template(tmpl, sample.at("messages"), false, "<s>", "</s>", {{"tools", sample.at("tools")}});
  const auto squeeze = [](std::string s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
        i += 2;
      } else if (s[i] != ' ' && s[i] != '\n') {
        out.push_back(s[i]);
      }
    }
    return out;
  };
  EXPECT_EQ(squeeze(rendered), squeeze(read_file(kShared + "/" + fixture.at("template").at("sample_text").get<std::string>())));
}

TEST(ChatTemplateInterpreter, MatchesJinja2OnSmallTemplates) {
  const Json fixture = read_json(kChatFixtures + "/interpreter.json");
  int rendered = 0;
  for (const Json& c : fixture.at("cases")) {
    const std::string source = c.at("template").get<std::string>();
    SCOPED_TRACE(source);
    if (c.contains("expected") && !c.contains("orzo_refuses")) {
      try {
        EXPECT_EQ(ChatTemplate(source).render(c.at("context")), c.at("expected").get<std::string>());
        ++rendered;
      } catch (const ChatTemplateError& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
      continue;
    }
    try {
      ChatTemplate(source).render(c.at("context"));
      ADD_FAILURE() << "rendered, but jinja2 raised " << c.value("error", "") << " / orzo should refuse: " << c.value("orzo_refuses", "");
    } catch (const ChatTemplateRaised& e) {
      EXPECT_EQ(c.value("error", ""), "raise") << e.what();
      EXPECT_EQ(e.what(), c.value("message", ""));
    } catch (const ChatTemplateError& e) {
      EXPECT_NE(c.value("error", ""), "raise") << e.what();
      if (c.contains("orzo_refuses")) {
        EXPECT_NE(std::string(e.what()).find("unsupported"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GE(rendered, 60);
}

std::string render(const std::string& source, const Json& context = Json::object()) { return ChatTemplate(source).render(context); }

// The ChatTemplateError message of parsing and rendering `source`, or "" when it renders.
std::string error_of(const std::string& source, const Json& context = Json::object(), jinja::RenderLimits limits = {}) {
  try {
    ChatTemplate(source, limits).render(context);
  } catch (const ChatTemplateError& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateInterpreter, TruthinessFollowsPython) {
  const Json ctx = {{"values", {0, 1, "", "a", Json::array(), Json::array({0}), Json::object(), nullptr, false, 0.0, 2.5}}};
  EXPECT_EQ(render("{% for v in values %}{{ 1 if v else 0 }}{% endfor %}", ctx), "01010100001");
  EXPECT_EQ(render("{{ missing or 'dflt' }}|{{ 0 and 1 }}|{{ [] or 'x' }}"), "dflt|0|x");
}

TEST(ChatTemplateInterpreter, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} {% endfor %}"),
            "0TrueFalse33 1FalseFalse32 2FalseTrue31 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3][::-1] %}{{ x }}{{ loop.previtem | default('-') }}{% endfor %}"), "3-2312");
}

TEST(ChatTemplateInterpreter, WhitespaceControlAsHfConfiguresJinja) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("<\n  {% if true %}\n  x\n  {% endif %}\n>"), "<\n  x\n>");
  EXPECT_EQ(render("a \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");  // one trailing newline is dropped
}

TEST(ChatTemplateInterpreter, DictsKeepInsertionOrder) {
  const Json ctx = Json::parse(R"({"tool": {"type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": "é"}}}})");
  EXPECT_EQ(render("{{ tool | tojson }}", ctx), R"({"type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": "é"}}})");
}

TEST(ChatTemplateInterpreter, UnsupportedConstructsAreNamed) {
  EXPECT_EQ(error_of("ab\n  {% call foo() %}{% endcall %}"), "2:6: unsupported tag 'call'");
  EXPECT_EQ(error_of("{% raw %}x{% endraw %}"), "1:4: unsupported tag 'raw'");
  EXPECT_EQ(error_of("{% include 'x.j2' %}"), "1:4: unsupported tag 'include'");
  EXPECT_EQ(error_of("{{ x | wordcount }}"), "1:8: unsupported filter 'wordcount'");
  EXPECT_EQ(error_of("{{ x is escaped }}"), "1:9: unsupported test 'escaped'");
  EXPECT_EQ(error_of("{% for x in y recursive %}{% endfor %}"), "1:15: unsupported: recursive for loops");
  EXPECT_EQ(error_of("{{ f(*args) }}"), "1:6: unsupported: *args and **kwargs in calls");
  EXPECT_EQ(error_of("{{ '%s' % 1 }}"), "1:4: unsupported: printf-style string formatting with '%'");
  EXPECT_EQ(error_of("{{ 'a'.format() }}"), "1:7: unsupported string method 'format'");
  EXPECT_EQ(error_of("{{ 0x1F }}"), "1:4: unsupported integer literal (hex, octal and binary are not implemented)");
}

TEST(ChatTemplateInterpreter, RuntimeErrorsCarryThePosition) {
  EXPECT_EQ(error_of("line\n{{ messages[0].content }}"), "2:12: 'messages' is undefined");
  EXPECT_EQ(error_of("{{ 1 + 'a' }}"), "1:4: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{% if x %}"), "1:11: unexpected end of template, expected 'elif'");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "1:4: integer overflow: the interpreter's integers are 64-bit");
}

TEST(ChatTemplateInterpreter, RaiseExceptionKeepsTheMessage) {
  try {
    render("{{ raise_exception('bad role: ' + role) }}", {{"role", "tool"}});
    FAIL() << "no exception";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_STREQ(e.what(), "bad role: tool");
  }
}

TEST(ChatTemplateInterpreter, HostileTemplatesHitLimitsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(error_of("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}").find("evaluation steps"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}").find("string over the limit"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 9223372036854775807 }}").find("string over the limit"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}").find("list over the limit"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}").find("nested deeper"),
            std::string::npos);
  EXPECT_NE(error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("macro calls nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}").find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ 1" + std::string(1000, '+') + "1 }}").find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ x" + std::string(1000, '|') + "}}"), "");
  EXPECT_NE(error_of("{{ range(1000000) }}").find("100000"), std::string::npos);
  jinja::RenderLimits small;
  small.max_string_bytes = 100;
  EXPECT_NE(error_of("{% for i in range(200) %}x{% endfor %}", Json::object(), small).find("string over the limit"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// A namespace can be made to contain itself; the sanitizer build's leak checker watches this.
TEST(ChatTemplateInterpreter, SelfReferenceDoesNotLeak) {
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% set ns.l = [ns] %}{% for x in [ns] %}{% set ns.loop = loop %}{% endfor %}{{ ns.l | length }}"),
            "1");
}

TEST(ChatTemplate, ApplyChatTemplateConventions) {
  const ChatTemplate tmpl(
      "{% for m in messages %}{{ m.role }}:{{ m | tojson }};{% endfor %}{{ tools is none }}{{ add_generation_prompt }}{{ bos_token }}{{ eos_token }}{{ x }}");
  const Json messages = Json::parse(R"([{"role": "user", "content": "hi", "name": null},
                                        {"role": "assistant", "content": "a", "reasoning": "r"}])");
  EXPECT_EQ(apply_chat_template(tmpl, messages, true, "<s>", "</s>", {{"x", 7}}),
            R"(user:{"role": "user", "content": "hi"};assistant:{"thinking": "r", "role": "assistant", "content": "a", "reasoning": "r", "reasoning_content": "r"};TrueTrue<s></s>7)");
  EXPECT_THROW(apply_chat_template(tmpl, Json::array(), true, "", ""), ChatTemplateError);
  EXPECT_THROW(apply_chat_template(tmpl, Json::array({1}), true, "", ""), ChatTemplateError);
}

}  // namespace
}  // namespace orzo
