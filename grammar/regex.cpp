#include "grammar/regex.hpp"

#include "grammar/grammar_error.hpp"

namespace orzo::grammar {

RegexPtr empty_string() {
  static const RegexPtr e = std::make_shared<const Regex>();
  return e;
}

RegexPtr nothing() {
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::alt;
  return r;
}

RegexPtr chars(CharSet set) {
  if (set.empty()) return nothing();
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::chars;
  r->chars = std::move(set);
  return r;
}

RegexPtr literal(const std::string& utf8) {
  std::vector<RegexPtr> parts;
  for (uint32_t c : code_points(utf8)) parts.push_back(chars(CharSet::single(c)));
  return concat(std::move(parts));
}

RegexPtr concat(std::vector<RegexPtr> parts) {
  if (parts.size() == 1) return parts.front();
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::concat;
  r->parts = std::move(parts);
  return r;
}

RegexPtr alt(std::vector<RegexPtr> parts) {
  if (parts.size() == 1) return parts.front();
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::alt;
  r->parts = std::move(parts);
  return r;
}

RegexPtr repeat(RegexPtr part, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return part;
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::repeat;
  r->parts = {std::move(part)};
  r->min = min;
  r->max = max;
  return r;
}

RegexPtr separated(RegexPtr item, RegexPtr separator, bool at_least_one) {
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::separated;
  r->parts = {std::move(item), std::move(separator)};
  r->min = at_least_one ? 1 : 0;
  return r;
}

RegexPtr rule(int32_t index) {
  auto r = std::make_shared<Regex>();
  r->kind = Regex::Kind::rule;
  r->min = index;
  return r;
}

uint32_t next_code_point(const std::string& utf8, size_t& at) {
  const auto b = static_cast<uint8_t>(utf8[at]);
  const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || at + static_cast<size_t>(n) > utf8.size()) throw GrammarError("the text is not valid UTF-8");
  uint32_t c = n == 1 ? b : b & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const auto cont = static_cast<uint8_t>(utf8[at + static_cast<size_t>(k)]);
    if ((cont & 0xC0) != 0x80) throw GrammarError("the text is not valid UTF-8");
    c = (c << 6) | (cont & 0x3F);
  }
  at += static_cast<size_t>(n);
  return c;
}

std::vector<uint32_t> code_points(const std::string& utf8) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < utf8.size();) out.push_back(next_code_point(utf8, i));
  return out;
}

}  // namespace orzo::grammar
