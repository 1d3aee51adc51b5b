// Tool calls read back from outputs, whole and as they stream, in each format; markup that
// does not parse stays text.

#include "server/tool_call_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orzo {
namespace {

using grammar::ToolCallFormat;

TEST(ToolCallParser, HermesCallsAndTheTextAroundThem) {
  const auto split = split_tool_calls(ToolCallFormat::hermes,
                                      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                      "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  EXPECT_EQ(split.content, "Let me check.");
  ASSERT_EQ(split.calls.size(), 2u);
  EXPECT_EQ(split.calls[0].name, "get_weather");
  EXPECT_EQ(split.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(split.calls[1].arguments, R"({"a":1})");
  // Broken JSON, or no name: text.
  const std::string broken = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call>";
  EXPECT_TRUE(split_tool_calls(ToolCallFormat::hermes, broken).calls.empty());
  EXPECT_EQ(split_tool_calls(ToolCallFormat::hermes, broken).content, broken);
  EXPECT_TRUE(split_tool_calls(ToolCallFormat::hermes, "<tool_call>{\"arguments\": {}}</tool_call>").calls.empty());
  EXPECT_EQ(split_tool_calls(ToolCallFormat::hermes, "no calls").content, "no calls");
  // An unclosed last call (the output was cut at its end) still counts when its JSON is whole.
  EXPECT_EQ(split_tool_calls(ToolCallFormat::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}").calls.size(), 1u);
}

TEST(ToolCallParser, Llama3JsonAndMistral) {
  auto l = split_tool_calls(ToolCallFormat::llama3_json,
                            "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": \"a; b\"}}; {\"name\": \"g\", \"parameters\": {}}");
  ASSERT_EQ(l.calls.size(), 2u);
  EXPECT_EQ(l.calls[0].arguments, R"({"x":"a; b"})");
  EXPECT_EQ(l.calls[1].name, "g");
  EXPECT_TRUE(l.content.empty());
  EXPECT_TRUE(split_tool_calls(ToolCallFormat::llama3_json, "The answer is {x}.").calls.empty());
  auto m = split_tool_calls(ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"q\": 1}}, {\"name\": \"g\", \"arguments\": {}}]");
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].arguments, R"({"q":1})");
  EXPECT_TRUE(split_tool_calls(ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": ").calls.empty());
}

// Fed a character at a time: text never includes a call or a marker's start, and the calls
// come whole, the same as parsing the whole output.
TEST(ToolCallParser, StreamingHoldsCallsBackAndSendsThemWhole) {
  const std::vector<std::pair<ToolCallFormat, std::string>> outputs = {
      {ToolCallFormat::hermes, "Sure <tool <tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"</tool\"}}\n</tool_call> done <tool_"},
      {ToolCallFormat::hermes, "plain text with < and <tool but no call"},
      {ToolCallFormat::llama3_json, " {\"name\": \"f\", \"parameters\": {\"k\": [1, 2]}}"},
      {ToolCallFormat::llama3_json, "Just words {not a call}"},
      {ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]"},
  };
  for (const auto& [format, text] : outputs) {
    SCOPED_TRACE(text);
    ToolCallStream stream(format);
    std::string shown;
    std::vector<ParsedToolCall> calls;
    for (const char c : text) {
      auto part = stream.feed(std::string(1, c));
      shown += part.content;
      for (auto& call : part.calls) calls.push_back(call);
      EXPECT_EQ(shown.find("<tool_call>"), std::string::npos);
    }
    auto rest = stream.finish();
    shown += rest.content;
    for (auto& call : rest.calls) calls.push_back(call);
    const auto whole = split_tool_calls(format, text);
    ASSERT_EQ(calls.size(), whole.calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].name, whole.calls[i].name);
      EXPECT_EQ(calls[i].arguments, whole.calls[i].arguments);
    }
    if (whole.calls.empty()) {
      EXPECT_EQ(shown, text);
    }
  }
}

}  // namespace
}  // namespace orzo
