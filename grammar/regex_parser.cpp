#include "grammar/regex_parser.hpp"

#include "grammar/grammar_error.hpp"

#include <cctype>
#include <vector>

namespace orzo::grammar {
namespace {

CharSet ascii_digits() { return CharSet::range('0', '9'); }
CharSet ascii_word() {
  CharSet s = CharSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CharSet ascii_space() {
  CharSet s = CharSet::range('\t', '\r');  // \t \n \v \f \r
  s.add(' ', ' ');
  return s;
}
CharSet ascii_minus(const CharSet& s) { return CharSet::range(0, 0x7F).minus(s); }

class Parser {
 public:
  Parser(const std::string& pattern, int32_t max_repeat)
      : cps_(code_points(pattern)), pattern_(pattern), max_repeat_(max_repeat) {}

  RegexPtr parse() {
    if (peek('^')) ++i_;
    RegexPtr r = alternation(0);
    if (i_ < cps_.size()) fail("an unbalanced ')'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("regular expression: " + what + " at position " + std::to_string(i_) + " of '" + pattern_ + "'");
  }
  bool peek(uint32_t c) const { return i_ < cps_.size() && cps_[i_] == c; }
  bool at_end() const { return i_ >= cps_.size(); }

  RegexPtr alternation(int depth) {
    std::vector<RegexPtr> branches{sequence(depth)};
    while (peek('|')) {
      ++i_;
      branches.push_back(sequence(depth));
    }
    return alt(std::move(branches));
  }

  RegexPtr sequence(int depth) {
    std::vector<RegexPtr> items;
    while (!at_end() && !peek('|') && !peek(')')) {
      if (peek('$') && i_ + 1 == cps_.size()) {
        ++i_;
        break;
      }
      RegexPtr atom = this->atom(depth);
      items.push_back(quantified(std::move(atom)));
    }
    return concat(std::move(items));
  }

  int32_t number() {
    if (at_end() || !std::isdigit(static_cast<int>(cps_[i_]))) fail("a repetition count was expected");
    int64_t n = 0;
    while (!at_end() && cps_[i_] < 128 && std::isdigit(static_cast<int>(cps_[i_]))) {
      n = n * 10 + (cps_[i_++] - '0');
      if (n > max_repeat_) fail("a repetition count above " + std::to_string(max_repeat_));
    }
    return static_cast<int32_t>(n);
  }

  // Whether a '{' at i_ starts a count {n}, {n,}, {,m} or {n,m}; Python reads any other '{'
  // as itself.
  bool count_follows() const {
    size_t j = i_ + 1, digits = 0, commas = 0;
    for (; j < cps_.size() && cps_[j] != '}'; ++j) {
      if (cps_[j] == ',') ++commas;
      else if (cps_[j] < 128 && std::isdigit(static_cast<int>(cps_[j]))) ++digits;
      else return false;
    }
    return j < cps_.size() && digits > 0 && commas <= 1;
  }

  RegexPtr quantified(RegexPtr atom) {
    while (!at_end()) {
      int32_t lo = 0, hi = -1;
      if (peek('*')) {
        ++i_;
      } else if (peek('+')) {
        lo = 1, ++i_;
      } else if (peek('?')) {
        hi = 1, ++i_;
      } else if (peek('{') && count_follows()) {
        ++i_;
        lo = peek(',') ? 0 : number();
        if (peek(',')) {
          ++i_;
          hi = peek('}') ? -1 : number();
        } else {
          hi = lo;
        }
        ++i_;  // }
        if (hi >= 0 && hi < lo) fail("a repetition {n,m} with m < n");
      } else {
        return atom;
      }
      if (peek('?')) ++i_;  // lazy: the same language
      if (peek('+')) fail("a possessive quantifier");
      atom = repeat(std::move(atom), lo, hi);
    }
    return atom;
  }

  RegexPtr atom(int depth) {
    const uint32_t c = cps_[i_];
    if (c == '(') return group(depth);
    if (c == '[') return chars(char_class());
    if (c == '.') {
      ++i_;
      return chars(CharSet::all().minus(CharSet::single('\n')));
    }
    if (c == '\\') return chars(escape(false));
    if (c == '*' || c == '+' || c == '?') fail("a quantifier with nothing to repeat");
    if (c == '^' || c == '$') fail("an anchor inside the pattern");
    ++i_;
    return chars(CharSet::single(c));
  }

  RegexPtr group(int depth) {
    if (depth >= 100) fail("groups nested deeper than 100");
    ++i_;  // (
    if (peek('?')) {
      ++i_;
      if (peek(':')) {
        ++i_;
      } else if (peek('P') && i_ + 1 < cps_.size() && cps_[i_ + 1] == '<') {
        skip_name(i_ + 2);
      } else if (peek('<') && i_ + 1 < cps_.size() && cps_[i_ + 1] != '=' && cps_[i_ + 1] != '!') {
        skip_name(i_ + 1);
      } else if (peek('=') || peek('!') || peek('<')) {
        fail("a lookaround assertion");
      } else if (peek('P') && i_ + 1 < cps_.size() && cps_[i_ + 1] == '=') {
        fail("a backreference");
      } else if (peek('(')) {
        fail("a conditional group");
      } else if (peek('#')) {
        fail("a comment group");
      } else {
        fail("inline flags");
      }
    }
    RegexPtr inner = alternation(depth + 1);
    if (!peek(')')) fail("a '(' without its ')'");
    ++i_;
    return inner;
  }

  void skip_name(size_t from) {
    i_ = from;
    while (!at_end() && !peek('>')) ++i_;
    if (at_end()) fail("an unterminated group name");
    ++i_;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end() || cps_[i_] >= 128 || !std::isxdigit(static_cast<int>(cps_[i_]))) fail("a malformed hex escape");
      const auto d = static_cast<char>(cps_[i_++]);
      v = v * 16 + static_cast<uint32_t>(std::isdigit(d) ? d - '0' : std::tolower(d) - 'a' + 10);
    }
    if (v > kMaxCodePoint) fail("a code point above U+10FFFF");
    return v;
  }

  // After a backslash: the set it stands for. In a class, \b is a backspace.
  CharSet escape(bool in_class) {
    ++i_;  // backslash
    if (at_end()) fail("a trailing backslash");
    const uint32_t c = cps_[i_++];
    switch (c) {
      case 'd': return ascii_digits();
      case 'D': return ascii_minus(ascii_digits());
      case 'w': return ascii_word();
      case 'W': return ascii_minus(ascii_word());
      case 's': return ascii_space();
      case 'S': return ascii_minus(ascii_space());
      case 't': return CharSet::single('\t');
      case 'n': return CharSet::single('\n');
      case 'r': return CharSet::single('\r');
      case 'f': return CharSet::single('\f');
      case 'v': return CharSet::single('\v');
      case 'a': return CharSet::single('\a');
      case '0': return CharSet::single(0);
      case 'x': return CharSet::single(hex(2));
      case 'u': return CharSet::single(hex(4));
      case 'U': return CharSet::single(hex(8));
      case 'b':
        if (in_class) return CharSet::single('\b');
        --i_;
        fail("a word-boundary anchor \\b");
      default: break;
    }
    if (c < 128 && std::isalnum(static_cast<int>(c))) {
      --i_;
      if (std::isdigit(static_cast<int>(c))) fail("a backreference");
      fail(std::string("the escape \\") + static_cast<char>(c));
    }
    return CharSet::single(c);
  }

  CharSet char_class() {
    ++i_;  // [
    bool negate = false;
    if (peek('^')) negate = true, ++i_;
    CharSet set;
    bool first = true;
    while (!at_end() && (!peek(']') || first)) {
      first = false;
      if (peek('[') && i_ + 1 < cps_.size() && cps_[i_ + 1] == ':') fail("a POSIX class [:name:]");
      CharSet item;
      uint32_t lo = 0;
      bool single = false;
      if (peek('\\')) {
        item = escape(true);
        single = item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second;
        lo = single ? item.ranges()[0].first : 0;
      } else {
        lo = cps_[i_++];
        item = CharSet::single(lo);
        single = true;
      }
      if (single && peek('-') && i_ + 1 < cps_.size() && cps_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (peek('\\')) {
          const CharSet end = escape(true);
          if (end.ranges().size() != 1 || end.ranges()[0].first != end.ranges()[0].second) fail("a class range ending in a class");
          hi = end.ranges()[0].first;
        } else {
          hi = cps_[i_++];
        }
        if (hi < lo) fail("a class range out of order");
        item = CharSet::range(lo, hi);
      }
      set.add(item);
    }
    if (!peek(']')) fail("a '[' without its ']'");
    ++i_;
    return negate ? set.complement() : set;
  }

  std::vector<uint32_t> cps_;
  std::string pattern_;
  int32_t max_repeat_;
  size_t i_ = 0;
};

}  // namespace

RegexPtr parse_regex(const std::string& pattern, int32_t max_repeat) { return Parser(pattern, max_repeat).parse(); }

}  // namespace orzo::grammar
