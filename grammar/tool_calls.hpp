#pragma once
// Tool calls as chat templates teach a model to write them, as a grammar, so that
// `tool_choice: required` or a named function can be enforced: every output is then calls to
// the offered functions whose arguments satisfy their parameters' JSON schemas.
//   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, calls one per
//                line (Hermes, Qwen 2.5 and 3, and the format orzo uses by default);
//   llama3_json  {"name": "f", "parameters": {...}}, calls separated by "; " (Llama 3.1-3.3);
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (Mistral).
// The constraint's text (OutputConstraint::Kind::tool_calls) is
//   {"format": "hermes", "parallel": true, "functions": [{"name": "f", "parameters": {...}}]}
// with `parallel` allowing more than one call.
#include <optional>
#include <string>

#include "grammar/grammar.hpp"

namespace orzo::grammar {

enum class ToolCallFormat { hermes, llama3_json, mistral };

const char* tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> parse_tool_call_format(const std::string& name);
// The format a chat template teaches, read from its text; hermes when it shows none.
ToolCallFormat tool_call_format_of_template(const std::string& template_source);

// GrammarError when the spec is malformed or a function's parameters are no usable schema.
Grammar tool_calls_grammar(const std::string& spec);

}  // namespace orzo::grammar
