#include "grammar/byte_dfa.hpp"

#include "grammar/grammar_error.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace orzo::grammar {
namespace {

struct Edge {
  uint8_t lo, hi;
  int32_t to;
};

struct NfaState {
  std::vector<int32_t> eps;
  std::vector<Edge> edges;
};

class Nfa {
 public:
  int32_t add() {
    if (states.size() >= ByteDfa::kMaxNfaStates)
      throw GrammarError("the constraint is too large (more than " + std::to_string(ByteDfa::kMaxNfaStates) +
                         " automaton states): simplify it or bound its repetitions");
    states.emplace_back();
    return static_cast<int32_t>(states.size() - 1);
  }
  void eps(int32_t from, int32_t to) { states[static_cast<size_t>(from)].eps.push_back(to); }

  // Appends the language of r after state `from`; returns the state where it ends.
  int32_t build(const Regex& r, int32_t from) {
    switch (r.kind) {
      case Regex::Kind::chars: {
        const int32_t end = add();
        for (const auto& seq : utf8_sequences(r.chars)) {
          int32_t at = from;
          for (size_t i = 0; i < seq.size(); ++i) {
            const int32_t to = i + 1 == seq.size() ? end : add();
            states[static_cast<size_t>(at)].edges.push_back({seq[i].first, seq[i].second, to});
            at = to;
          }
        }
        return end;
      }
      case Regex::Kind::concat:
        for (const auto& part : r.parts) from = build(*part, from);
        return from;
      case Regex::Kind::alt: {
        const int32_t end = add();
        for (const auto& part : r.parts) {
          const int32_t start = add();  // its own start: a loop inside one part must not reach another
          eps(from, start);
          eps(build(*part, start), end);
        }
        return end;
      }
      case Regex::Kind::separated: {
        const int32_t end = add();
        if (r.min == 0) eps(from, end);
        const int32_t item = add();
        eps(from, item);
        const int32_t after = add();
        eps(build(*r.parts[0], item), after);
        eps(after, end);
        const int32_t sep = add();
        eps(after, sep);
        eps(build(*r.parts[1], sep), item);
        return end;
      }
      case Regex::Kind::repeat: {
        const Regex& part = *r.parts.front();
        for (int32_t i = 0; i < r.min; ++i) {
          const int32_t start = add();
          eps(from, start);
          from = build(part, start);
        }
        if (r.max < 0) {
          const int32_t loop = add();
          eps(from, loop);
          const int32_t start = add();
          eps(loop, start);
          eps(build(part, start), loop);
          return loop;
        }
        const int32_t end = add();
        for (int32_t i = r.min; i < r.max; ++i) {
          eps(from, end);
          const int32_t start = add();
          eps(from, start);
          from = build(part, start);
        }
        eps(from, end);
        return end;
      }
    }
    return from;
  }

  std::vector<NfaState> states;
};

void close(const Nfa& nfa, std::vector<int32_t>& set, std::vector<uint8_t>& seen) {
  std::vector<int32_t> stack(set.begin(), set.end());
  for (int32_t s : set) seen[static_cast<size_t>(s)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t t : nfa.states[static_cast<size_t>(s)].eps)
      if (!seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = 1;
        set.push_back(t);
        stack.push_back(t);
      }
  }
  for (int32_t s : set) seen[static_cast<size_t>(s)] = 0;
  std::sort(set.begin(), set.end());
}

}  // namespace

ByteDfa ByteDfa::compile(const RegexPtr& regex) {
  Nfa nfa;
  const int32_t start = nfa.add();
  const int32_t accept = nfa.build(*regex, start);

  // Bytes no edge tells apart share a class, so the table has a column per class, not per byte.
  std::vector<uint8_t> boundary(257, 0);
  for (const auto& s : nfa.states)
    for (const auto& e : s.edges) boundary[e.lo] = boundary[static_cast<size_t>(e.hi) + 1] = 1;
  ByteDfa dfa;
  uint8_t cls = 0;
  for (int b = 0; b < 256; ++b) {
    if (b > 0 && boundary[static_cast<size_t>(b)]) ++cls;
    dfa.byte_class_[static_cast<size_t>(b)] = cls;
  }
  dfa.classes_ = static_cast<size_t>(cls) + 1;
  std::vector<uint8_t> representative(dfa.classes_);
  for (int b = 255; b >= 0; --b) representative[dfa.byte_class_[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);

  std::vector<uint8_t> seen(nfa.states.size(), 0);
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<int32_t> first{start};
  close(nfa, first, seen);
  ids.emplace(first, 0);
  sets.push_back(first);
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  for (size_t d = 0; d < sets.size(); ++d) {
    accepting.push_back(std::binary_search(sets[d].begin(), sets[d].end(), accept) ? 1 : 0);
    for (size_t c = 0; c < dfa.classes_; ++c) {
      const uint8_t b = representative[c];
      std::vector<int32_t> target;
      for (int32_t s : sets[d])
        for (const auto& e : nfa.states[static_cast<size_t>(s)].edges)
          if (e.lo <= b && b <= e.hi) target.push_back(e.to);
      if (target.empty()) {
        next.push_back(kDead);
        continue;
      }
      std::sort(target.begin(), target.end());
      target.erase(std::unique(target.begin(), target.end()), target.end());
      close(nfa, target, seen);
      auto [it, added] = ids.emplace(target, static_cast<int32_t>(sets.size()));
      if (added) {
        if (sets.size() >= kMaxDfaStates)
          throw GrammarError("the constraint is too complex (more than " + std::to_string(kMaxDfaStates) +
                             " automaton states): simplify it or bound its repetitions");
        sets.push_back(target);
      }
      next.push_back(it->second);
    }
  }

  // Trim: keep the states from which acceptance can be reached, renumbered in order.
  const size_t n = sets.size();
  std::vector<std::vector<int32_t>> into(n);
  for (size_t d = 0; d < n; ++d)
    for (size_t c = 0; c < dfa.classes_; ++c)
      if (const int32_t t = next[d * dfa.classes_ + c]; t != kDead) into[static_cast<size_t>(t)].push_back(static_cast<int32_t>(d));
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> stack;
  for (size_t d = 0; d < n; ++d)
    if (accepting[d]) live[d] = 1, stack.push_back(static_cast<int32_t>(d));
  while (!stack.empty()) {
    const int32_t t = stack.back();
    stack.pop_back();
    for (int32_t d : into[static_cast<size_t>(t)])
      if (!live[static_cast<size_t>(d)]) live[static_cast<size_t>(d)] = 1, stack.push_back(d);
  }
  if (!live[0]) throw GrammarError("the constraint matches nothing: no output could satisfy it");
  std::vector<int32_t> renumber(n, kDead);
  int32_t kept = 0;
  for (size_t d = 0; d < n; ++d)
    if (live[d]) renumber[d] = kept++;
  dfa.next_.assign(static_cast<size_t>(kept) * dfa.classes_, kDead);
  dfa.accepting_.assign(static_cast<size_t>(kept), 0);
  dfa.continues_.assign(static_cast<size_t>(kept), 0);
  for (size_t d = 0; d < n; ++d) {
    if (!live[d]) continue;
    const auto r = static_cast<size_t>(renumber[d]);
    dfa.accepting_[r] = accepting[d];
    for (size_t c = 0; c < dfa.classes_; ++c) {
      const int32_t t = next[d * dfa.classes_ + c];
      const int32_t to = t == kDead ? kDead : renumber[static_cast<size_t>(t)];
      dfa.next_[r * dfa.classes_ + c] = to;
      if (to != kDead) dfa.continues_[r] = 1;
    }
  }
  return dfa;
}

}  // namespace orzo::grammar
