#include "grammar/grammar.hpp"

#include "grammar/grammar_error.hpp"

#include <functional>

namespace orzo::grammar {
namespace {

// The rules a tree names, each once per mention.
void named_rules(const Regex& r, std::vector<int32_t>& out) {
  if (r.kind == Regex::Kind::rule) out.push_back(r.min);
  for (const auto& p : r.parts) named_rules(*p, out);
}

}  // namespace

int32_t Grammar::add(std::string name) {
  names.push_back(std::move(name));
  bodies.emplace_back();
  return static_cast<int32_t>(bodies.size() - 1);
}

int32_t Grammar::find(const std::string& name) const {
  for (size_t r = 0; r < names.size(); ++r)
    if (names[r] == name) return static_cast<int32_t>(r);
  return -1;
}

Grammar Grammar::inlined() const {
  const size_t n = bodies.size();
  if (n == 0) throw GrammarError("grammar: there is no rule");
  std::vector<std::vector<int32_t>> named(n);
  for (size_t r = 0; r < n; ++r)
    if (bodies[r]) named_rules(*bodies[r], named[r]);
  // Which rules rule 0 reaches, and which of those reach themselves.
  const auto reach_from = [&](int32_t from) {
    std::vector<uint8_t> seen(n, 0);
    std::vector<int32_t> stack(named[static_cast<size_t>(from)]);
    while (!stack.empty()) {
      const int32_t r = stack.back();
      stack.pop_back();
      if (seen[static_cast<size_t>(r)]) continue;
      seen[static_cast<size_t>(r)] = 1;
      if (!bodies[static_cast<size_t>(r)]) throw GrammarError("grammar: the rule '" + names[static_cast<size_t>(r)] + "' is never defined");
      for (int32_t t : named[static_cast<size_t>(r)]) stack.push_back(t);
    }
    return seen;
  };
  if (!bodies[0]) throw GrammarError("grammar: the rule '" + names[0] + "' is never defined");
  const std::vector<uint8_t> reached = reach_from(0);
  Grammar out;
  std::vector<int32_t> kept(n, -1);
  kept[0] = out.add(names[0]);
  for (size_t r = 1; r < n; ++r)
    if (reached[r] && reach_from(static_cast<int32_t>(r))[r]) kept[r] = out.add(names[r]);
  // Trees with inlined rules, each rule's once (they form no cycle: a cycle's rules are kept).
  std::vector<RegexPtr> expanded(n);
  std::function<RegexPtr(const RegexPtr&)> expand = [&](const RegexPtr& t) -> RegexPtr {
    if (t->kind == Regex::Kind::rule) {
      const auto r = static_cast<size_t>(t->min);
      if (kept[r] >= 0) return rule(kept[r]);
      if (!expanded[r]) expanded[r] = expand(bodies[r]);
      return expanded[r];
    }
    if (t->parts.empty()) return t;
    std::vector<RegexPtr> parts;
    bool changed = false;
    for (const auto& p : t->parts) {
      parts.push_back(expand(p));
      changed = changed || parts.back() != p;
    }
    if (!changed) return t;
    auto copy = std::make_shared<Regex>(*t);
    copy->parts = std::move(parts);
    return copy;
  };
  for (size_t r = 0; r < n; ++r)
    if (kept[r] >= 0) out.define(kept[r], expand(bodies[r]));
  return out;
}

bool Grammar::regular() const {
  if (bodies.size() != 1 || !bodies[0]) return false;
  std::vector<int32_t> named;
  named_rules(*bodies[0], named);
  return named.empty();
}

}  // namespace orzo::grammar
