#include "chat_template/jinja_lexer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/py_string.hpp"

namespace orzo::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// jinja2 reads "\r\n" and "\r" as "\n" and drops one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        push_text(src_.substr(pos_), pos_);
        break;
      }
      std::string text = src_.substr(pos_, tag - pos_);
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : '\0';
      if (sign == '-') {
        text = py::strip(text, std::nullopt, false, true);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone on its line takes the indentation with it.
        const size_t line_pos = text.rfind('\n') + 1;
        if ((line_pos > 0 || line_starting) && line_pos < text.size() && all_space(std::string_view(text).substr(line_pos))) {
          text.resize(line_pos);
        }
      }
      push_text(std::move(text), pos_);
      pos_ = tag + 2 + (sign != '\0' ? 1 : 0);
      if (kind == '#') {
        line_starting = skip_comment(tag);
      } else {
        line_starting = lex_tag(kind == '%', tag);
      }
    }
    tokens_.push_back(Token{TokenType::End, "", 0, 0});
    set_position(tokens_.back(), src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    Token t{};
    set_position(t, offset);
    throw ChatTemplateError(std::to_string(t.line) + ":" + std::to_string(t.col) + ": " + what);
  }

  void set_position(Token& t, size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const auto line = static_cast<size_t>(it - line_starts_.begin());
    t.line = static_cast<int>(line);
    t.col = static_cast<int>(offset - line_starts_[line - 1] + 1);
  }

  void push(TokenType type, std::string text, size_t offset) {
    Token t{type, std::move(text), 0, 0};
    set_position(t, offset);
    tokens_.push_back(std::move(t));
  }

  void push_text(std::string text, size_t offset) {
    if (!text.empty()) push(TokenType::Text, std::move(text), offset);
  }

  static bool all_space(std::string_view s) {
    const std::u32string cps = py::decode_utf8(s);
    return std::all_of(cps.begin(), cps.end(), py::is_space);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // After "-%}" and friends jinja2 swallows all whitespace; returns whether that ended a line.
  bool skip_whitespace_after_tag() {
    const std::u32string rest = py::decode_utf8(std::string_view(src_).substr(pos_));
    size_t n = 0;
    bool newline_last = false;
    std::string consumed;
    while (n < rest.size() && py::is_space(rest[n])) {
      newline_last = rest[n] == '\n';
      py::append_utf8(consumed, rest[n]);
      ++n;
    }
    pos_ += consumed.size();
    return newline_last;
  }

  bool skip_comment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(tag, "missing end of comment tag");
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    return finish_tag(sign, true);
  }

  // Consumes what follows a tag's end delimiter; returns jinja2's "line_starting" state.
  bool finish_tag(char sign, bool is_block) {
    if (sign == '-') return skip_whitespace_after_tag();
    if (sign == '\0' && is_block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
      return true;
    }
    return false;
  }

  bool lex_tag(bool is_block, size_t tag) {
    push(is_block ? TokenType::BlockBegin : TokenType::VariableBegin, "", tag);
    const char close = is_block ? '%' : '}';
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) fail(tag, is_block ? "unexpected end of template inside a block tag" : "unexpected end of template inside '{{'");
      if (balance.empty()) {
        const std::string_view rest = std::string_view(src_).substr(pos_);
        const std::string end(1, close);
        if (rest.substr(0, 3) == "-" + end + "}") {
          push(is_block ? TokenType::BlockEnd : TokenType::VariableEnd, "", pos_);
          pos_ += 3;
          return finish_tag('-', is_block);
        }
        if (is_block && rest.substr(0, 3) == "+%}") {
          push(TokenType::BlockEnd, "", pos_);
          pos_ += 3;
          return false;
        }
        if (rest.substr(0, 2) == end + "}") {
          push(is_block ? TokenType::BlockEnd : TokenType::VariableEnd, "", pos_);
          pos_ += 2;
          return finish_tag('\0', is_block);
        }
      }
      const char c = src_[pos_];
      if (is_tag_space(c)) {
        ++pos_;
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        push(TokenType::Name, src_.substr(start, pos_ - start), start);
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(balance);
      }
    }
  }

  // Decimal digits with optional single underscores between them, as jinja2's integer rule.
  size_t scan_digits(size_t p, std::string& digits) const {
    while (p < src_.size() && is_digit(src_[p])) {
      digits.push_back(src_[p++]);
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) ++p;
    }
    return p;
  }

  void lex_number() {
    const size_t start = pos_;
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::string_view("xXoObB").find(src_[pos_ + 1]) != std::string_view::npos) {
      fail(start, "unsupported integer literal (hex, octal and binary are not implemented)");
    }
    std::string digits;
    size_t p = scan_digits(pos_, digits);
    bool is_float = false;
    // jinja2's float rule does not apply right after a '.', so "x.0.1" is two subscripts.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot) {
      std::string mantissa = digits;
      size_t q = p;
      if (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) {
        mantissa.push_back('.');
        q = scan_digits(q + 1, mantissa);
        is_float = true;
      }
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t r = q + 1;
        std::string exponent = "e";
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) exponent.push_back(src_[r++]);
        if (r < src_.size() && is_digit(src_[r])) {
          r = scan_digits(r, exponent);
          mantissa += exponent;
          q = r;
          is_float = true;
        }
      }
      if (is_float) {
        digits = mantissa;
        p = q;
      }
    }
    if (!is_float && digits.size() > 1 && digits[0] == '0') {
      // jinja2 reads "012" as the integer 0 followed by 12; nobody writes that on purpose.
      fail(start, "unsupported integer literal with a leading zero");
    }
    Token t{is_float ? TokenType::Float : TokenType::Integer, src_.substr(start, p - start), 0, 0};
    set_position(t, start);
    errno = 0;
    if (is_float) {
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal exceeds 64 bits");
    }
    tokens_.push_back(std::move(t));
    pos_ = p;
  }

  void lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string raw;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unterminated string literal");
      const char c = src_[pos_];
      if (c == quote) break;
      if (c == '\\') {
        if (pos_ + 1 >= src_.size()) fail(start, "unterminated string literal");
        raw.push_back(c);
        raw.push_back(src_[pos_ + 1]);
        pos_ += 2;
      } else {
        raw.push_back(c);
        ++pos_;
      }
    }
    ++pos_;
    push(TokenType::String, decode_escapes(raw, start), start);
  }

  // Python's "unicode-escape" codec, which jinja2 applies to string literals.
  std::string decode_escapes(const std::string& raw, size_t where) const {
    const std::u32string cps = py::decode_utf8(raw);
    std::string out;
    const auto hex = [&](size_t& i, int n) {
      char32_t v = 0;
      for (int k = 0; k < n; ++k, ++i) {
        if (i >= cps.size() || !std::isxdigit(static_cast<int>(cps[i] < 0x80 ? cps[i] : 0))) fail(where, "truncated \\x, \\u or \\U escape in string literal");
        const auto d = static_cast<char>(cps[i]);
        v = v * 16 + static_cast<char32_t>(is_digit(d) ? d - '0' : (d | 0x20) - 'a' + 10);
      }
      return v;
    };
    for (size_t i = 0; i < cps.size();) {
      const char32_t c = cps[i++];
      if (c != '\\') {
        py::append_utf8(out, c);
        continue;
      }
      const char32_t e = cps[i++];
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': py::append_utf8(out, hex(i, 2)); break;
        case 'u': py::append_utf8(out, hex(i, 4)); break;
        case 'U': {
          const char32_t v = hex(i, 8);
          if (v > 0x10FFFF) fail(where, "\\U escape out of range in string literal");
          py::append_utf8(out, v);
          break;
        }
        case 'N': fail(where, "unsupported \\N{...} escape in string literal");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && i < cps.size() && cps[i] >= '0' && cps[i] <= '7'; ++k) v = v * 8 + (cps[i++] - '0');
            py::append_utf8(out, v);
          } else if (e >= 0x80) {
            // The codec sees a non-ASCII character as its own \x, \u or \U escape text.
            char buf[16];
            std::snprintf(buf, sizeof buf, e < 0x100 ? "\\x%02x" : (e < 0x10000 ? "\\u%04x" : "\\U%08x"), static_cast<unsigned>(e));
            out += buf;
          } else {
            out.push_back('\\');
            py::append_utf8(out, e);
          }
      }
    }
    py::decode_utf8(out);  // "\ud800" would leave a lone surrogate, which is not text
    return out;
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr std::array<std::string_view, 6> two = {"//", "**", "==", "!=", "<=", ">="};
    const std::string_view rest = std::string_view(src_).substr(pos_);
    for (const std::string_view op : two) {
      if (rest.substr(0, 2) == op) {
        push(TokenType::Operator, std::string(op), pos_);
        pos_ += 2;
        return;
      }
    }
    const char c = rest[0];
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
      const auto byte = static_cast<unsigned char>(c);
      fail(pos_, byte < 0x80 && byte >= 0x20 ? std::string("unexpected char '") + c + "'" : "unexpected character in tag (byte " + std::to_string(byte) + ")");
    }
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos_, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    push(TokenType::Operator, std::string(1, c), pos_);
    ++pos_;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  std::string normalized = normalize_newlines(source);
  try {
    py::decode_utf8(normalized);
  } catch (const ChatTemplateError& e) {
    throw ChatTemplateError(std::string("template: ") + e.what());
  }
  return Lexer(std::move(normalized)).run();
}

}  // namespace orzo::jinja
