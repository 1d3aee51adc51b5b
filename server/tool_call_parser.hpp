#pragma once
// Tool calls read back out of a chat model's output, in the format its template teaches
// (grammar/tool_calls.hpp): the text around them stays the message's content, each call
// becomes a function name and its arguments as a JSON text (OpenAI's `arguments`). Markup
// whose JSON does not parse, or names no function, stays text.
#include <string>
#include <vector>

#include "grammar/tool_calls.hpp"

namespace orzo {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON
};

struct ToolCallSplit {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

ToolCallSplit split_tool_calls(grammar::ToolCallFormat format, const std::string& text);

// The same as the output streams in: feed() answers the text that can be shown at once (no
// part of a call, nor the start of what may become one) and the calls completed by this
// piece; finish() what is left when the output ends.
class ToolCallStream {
 public:
  explicit ToolCallStream(grammar::ToolCallFormat format) : format_(format) {}
  ToolCallSplit feed(const std::string& text);
  ToolCallSplit finish();

 private:
  grammar::ToolCallFormat format_;
  std::string pending_;       // held back: a call, or what may start one
  bool whole_output_ = false;  // llama3_json and mistral: the output is calls; parsed at the end
  bool plain_ = false;         // decided: the output is text
};

}  // namespace orzo
