#pragma once
// Splits a Jinja template into tokens the way jinja2's lexer does under the Environment that HF
// transformers builds for chat templates (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): text between tags comes out already trimmed, so the parser and
// renderer never think about whitespace control again. Comments are dropped here.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orzo::jinja {

enum class TokenType { Text, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenType type;
  std::string text;  // Text: the output text; String: the decoded value; Name/Operator: as written
  int line = 1;
  int col = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws ChatTemplateError ("line:col: what") on text jinja2 would not lex or that is not UTF-8.
std::vector<Token> tokenize(std::string_view source);

}  // namespace orzo::jinja
