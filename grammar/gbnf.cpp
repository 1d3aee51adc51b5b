#include "grammar/gbnf.hpp"

#include "grammar/grammar_error.hpp"

#include <cctype>
#include <map>
#include <vector>

namespace orzo::grammar {
namespace {

// A rule body before references are resolved: regex structure, with rule names as leaves.
struct Expr {
  enum class Kind { regex, ref, concat, alt, repeat } kind = Kind::regex;
  RegexPtr regex;  // regex: a literal, class or `.`
  std::string name;  // ref: the rule; regex: its source text, to tell equal leaves apart
  std::vector<Expr> parts;
  int32_t min = 0, max = -1;
  size_t line = 0;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  std::map<std::string, Expr> parse() {
    std::map<std::string, Expr> rules;
    skip_space(true);
    while (i_ < s_.size()) {
      const size_t line = line_;
      const std::string name = parse_name();
      if (name.empty()) fail("a rule name was expected");
      skip_space(false);
      if (s_.compare(i_, 3, "::=") != 0) fail("'::=' was expected after '" + name + "'");
      i_ += 3;
      skip_space(true);
      Expr body = alternatives(false);
      body.line = line;
      if (!rules.emplace(name, std::move(body)).second) fail("the rule '" + name + "' is defined twice");
      skip_space(true);
    }
    return rules;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("grammar: " + what + " (line " + std::to_string(line_ + 1) + ")");
  }

 private:
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }

  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '\n' && newlines) {
        ++i_, ++line_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }

  Expr alternatives(bool nested) {
    Expr out;
    out.kind = Expr::Kind::alt;
    out.parts.push_back(sequence(nested));
    while (at('|')) {
      ++i_;
      skip_space(true);
      out.parts.push_back(sequence(nested));
    }
    return out.parts.size() == 1 ? std::move(out.parts.front()) : out;
  }

  Expr sequence(bool nested) {
    Expr out;
    out.kind = Expr::Kind::concat;
    while (i_ < s_.size()) {
      skip_space(nested);
      if (i_ >= s_.size() || at('|') || at(')') || at('\n')) break;
      // A name followed by ::= starts the next rule (a grammar written on one line).
      const size_t mark = i_;
      const std::string name = parse_name();
      if (!name.empty()) {
        const size_t after = i_;
        skip_space(false);
        if (s_.compare(i_, 3, "::=") == 0) {
          i_ = mark;
          break;
        }
        i_ = after;
        Expr ref;
        ref.kind = Expr::Kind::ref;
        ref.name = name;
        ref.line = line_;
        out.parts.push_back(postfix(std::move(ref)));
        continue;
      }
      out.parts.push_back(postfix(primary()));
    }
    return out.parts.size() == 1 ? std::move(out.parts.front()) : out;
  }

  Expr primary() {
    Expr e;
    if (at('(')) {
      ++i_;
      skip_space(true);
      e = alternatives(true);
      skip_space(true);
      if (!at(')')) fail("a '(' without its ')'");
      ++i_;
      return e;
    }
    e.kind = Expr::Kind::regex;
    const size_t start = i_;
    if (at('"')) {
      ++i_;
      std::vector<RegexPtr> cps;
      while (!at('"')) {
        if (i_ >= s_.size() || at('\n')) fail("an unterminated string literal");
        cps.push_back(chars(CharSet::single(char_at())));
      }
      ++i_;
      e.regex = concat(std::move(cps));
    } else if (at('[')) {
      e.regex = chars(char_class());
    } else if (at('.')) {
      ++i_;
      e.regex = chars(CharSet::all());
    } else {
      fail(std::string("unexpected '") + s_[i_] + "'");
    }
    e.name = s_.substr(start, i_ - start);
    return e;
  }

  Expr postfix(Expr e) {
    while (i_ < s_.size()) {
      int32_t lo, hi;
      if (at('*')) {
        lo = 0, hi = -1, ++i_;
      } else if (at('+')) {
        lo = 1, hi = -1, ++i_;
      } else if (at('?')) {
        lo = 0, hi = 1, ++i_;
      } else if (at('{')) {
        ++i_;
        skip_space(false);
        lo = at(',') ? 0 : number();
        skip_space(false);
        hi = lo;
        if (at(',')) {
          ++i_;
          skip_space(false);
          hi = at('}') ? -1 : number();
          skip_space(false);
        }
        if (!at('}')) fail("a malformed repetition {m,n}");
        ++i_;
        if (hi >= 0 && hi < lo) fail("a repetition {m,n} with n < m");
      } else {
        return e;
      }
      Expr r;
      r.kind = Expr::Kind::repeat;
      r.min = lo;
      r.max = hi;
      r.parts.push_back(std::move(e));
      e = std::move(r);
    }
    return e;
  }

  int32_t number() {
    if (!std::isdigit(static_cast<unsigned char>(i_ < s_.size() ? s_[i_] : 'x'))) fail("a repetition count was expected");
    int64_t n = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      n = n * 10 + (s_[i_++] - '0');
      if (n > 1000) fail("a repetition count above 1000");
    }
    return static_cast<int32_t>(n);
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) fail("a malformed hex escape");
      const char d = s_[i_++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(d)) ? d - '0' : std::tolower(d) - 'a' + 10);
    }
    if (v > kMaxCodePoint) fail("a code point above U+10FFFF");
    return v;
  }

  // One character of a literal or class, escapes decoded; UTF-8 read whole.
  uint32_t char_at() {
    if (at('\\')) {
      ++i_;
      if (i_ >= s_.size()) fail("a trailing backslash");
      const char c = s_[i_++];
      switch (c) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<unsigned char>(c);
        default: fail(std::string("the escape \\") + c);
      }
    }
    try {
      return next_code_point(s_, i_);
    } catch (const GrammarError&) {
      fail("invalid UTF-8");
    }
  }

  CharSet char_class() {
    ++i_;  // [
    bool negate = false;
    if (at('^')) negate = true, ++i_;
    CharSet set;
    while (!at(']')) {
      if (i_ >= s_.size() || at('\n')) fail("a '[' without its ']'");
      const uint32_t lo = char_at();
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
        ++i_;
        hi = char_at();
        if (hi < lo) fail("a class range out of order");
      }
      set.add(lo, hi);
    }
    ++i_;
    return negate ? set.complement() : set;
  }

  std::string s_;
  size_t i_ = 0;
  size_t line_ = 0;
};

bool same(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.name != b.name || a.min != b.min || a.max != b.max || a.parts.size() != b.parts.size())
    return false;
  for (size_t i = 0; i < a.parts.size(); ++i)
    if (!same(a.parts[i], b.parts[i])) return false;
  return true;
}

// `x (sep x)*` as written: the repetition that follows x, and its separator, when it is one.
const Expr* separator_after(const Expr& x, const Expr& next, Expr& sep) {
  if (next.kind != Expr::Kind::repeat || next.min != 0 || next.max != -1) return nullptr;
  const Expr& body = next.parts.front();
  if (body.kind != Expr::Kind::concat || body.parts.size() < 2 || !same(body.parts.back(), x)) return nullptr;
  sep = Expr{};
  sep.kind = Expr::Kind::concat;
  sep.parts.assign(body.parts.begin(), body.parts.end() - 1);
  return &next;
}

class Expander {
 public:
  explicit Expander(const std::map<std::string, int32_t>& index) : index_(index) {}

  RegexPtr expand(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::regex: return e.regex;
      case Expr::Kind::ref: {
        const auto it = index_.find(e.name);
        if (it == index_.end())
          throw GrammarError("grammar: the rule '" + e.name + "' is used (line " + std::to_string(e.line + 1) + ") but never defined");
        return rule(it->second);
      }
      case Expr::Kind::concat: {
        // `x (sep x)*` becomes one separated list: one copy of x in the automaton, not two.
        std::vector<RegexPtr> parts;
        for (size_t i = 0; i < e.parts.size(); ++i) {
          Expr sep;
          if (i + 1 < e.parts.size() && separator_after(e.parts[i], e.parts[i + 1], sep)) {
            parts.push_back(separated(expand(e.parts[i]), expand(sep), true));
            ++i;
          } else {
            parts.push_back(expand(e.parts[i]));
          }
        }
        return concat(std::move(parts));
      }
      case Expr::Kind::alt: {
        std::vector<RegexPtr> parts;
        for (const auto& p : e.parts) parts.push_back(expand(p));
        return alt(std::move(parts));
      }
      case Expr::Kind::repeat: return repeat(expand(e.parts.front()), e.min, e.max);
    }
    return nothing();
  }

 private:
  const std::map<std::string, int32_t>& index_;
};

}  // namespace

Grammar parse_gbnf(const std::string& text) {
  const auto rules = Parser(text).parse();
  if (rules.count("root") == 0) throw GrammarError("grammar: there is no rule 'root'");
  Grammar grammar;
  std::map<std::string, int32_t> index{{"root", grammar.add("root")}};
  for (const auto& [name, body] : rules)
    if (name != "root") index.emplace(name, grammar.add(name));
  Expander expander(index);
  for (const auto& [name, body] : rules) grammar.define(index.at(name), expander.expand(body));
  return grammar;
}

}  // namespace orzo::grammar
