#include "grammar/nfa.hpp"

#include "grammar/grammar_error.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

namespace orzo::grammar {
namespace {

// A set of NFA states by its elements: a lookup hashes it once and compares it with the sets
// of its bucket, where an ordered map compared it with ~log2(states) others, element by
// element, and large sets alike in their first elements made that the work of the build.
struct SetHash {
  size_t operator()(const std::vector<int32_t>& set) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t s : set) h = (h ^ static_cast<uint32_t>(s)) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

}  // namespace

int32_t Nfa::add() {
  if (used_ + states.size() >= max_states_)
    throw GrammarError("the constraint is too large (more than " + std::to_string(max_states_) +
                       " automaton states): simplify it or bound its repetitions");
  states.emplace_back();
  return static_cast<int32_t>(states.size() - 1);
}

int32_t Nfa::build(const Regex& r, int32_t from) {
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
    case Regex::Kind::rule: {
      const int32_t end = add();
      states[static_cast<size_t>(from)].calls.push_back({r.min, end});
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

void Nfa::close(std::vector<int32_t>& set) const {
  seen_.resize(states.size(), 0);
  std::vector<int32_t> stack(set.begin(), set.end());
  for (int32_t s : set) seen_[static_cast<size_t>(s)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t t : states[static_cast<size_t>(s)].eps)
      if (!seen_[static_cast<size_t>(t)]) {
        seen_[static_cast<size_t>(t)] = 1;
        set.push_back(t);
        stack.push_back(t);
      }
  }
  for (int32_t s : set) seen_[static_cast<size_t>(s)] = 0;
  std::sort(set.begin(), set.end());
}

ByteClasses ByteClasses::of_edges(const std::vector<const Nfa*>& automata) {
  std::vector<uint8_t> boundary(257, 0);
  for (const Nfa* nfa : automata)
    for (const auto& s : nfa->states)
      for (const auto& e : s.edges) boundary[e.lo] = boundary[static_cast<size_t>(e.hi) + 1] = 1;
  ByteClasses out;
  uint8_t cls = 0;
  for (int b = 0; b < 256; ++b) {
    if (b > 0 && boundary[static_cast<size_t>(b)]) ++cls;
    out.of[static_cast<size_t>(b)] = cls;
  }
  out.count = static_cast<size_t>(cls) + 1;
  out.representative.resize(out.count);
  for (int b = 255; b >= 0; --b) out.representative[out.of[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
  return out;
}

Subsets Subsets::build(const Nfa& nfa, int32_t start, int32_t accept, const ByteClasses& classes, size_t max_states,
                       size_t used, size_t max_work, size_t& work) {
  Subsets out;
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids;
  std::vector<std::vector<int32_t>> sets;
  // The state of a target set, added when new.
  const auto state_of = [&](std::vector<int32_t>& target) {
    std::sort(target.begin(), target.end());
    target.erase(std::unique(target.begin(), target.end()), target.end());
    nfa.close(target);
    work += target.size();
    auto [it, added] = ids.emplace(target, static_cast<int32_t>(sets.size()));
    if (added) {
      if (used + sets.size() >= max_states)
        throw GrammarError("the constraint is too complex (more than " + std::to_string(max_states) +
                           " automaton states): simplify it or bound its repetitions");
      sets.push_back(target);
    }
    return it->second;
  };
  std::vector<int32_t> first{start};
  state_of(first);
  for (size_t d = 0; d < sets.size(); ++d) {
    out.accepting.push_back(std::binary_search(sets[d].begin(), sets[d].end(), accept) ? 1 : 0);
    for (size_t c = 0; c < classes.count; ++c) {
      // A state's work is its set scanned once per byte class and each closed target set:
      // bounded by the states alone, a few thousand states of a thousand NFA states each
      // took seconds to refuse.
      work += sets[d].size();
      if (work > max_work)
        throw GrammarError("the constraint is too complex (its automaton takes more than " + std::to_string(max_work) +
                           " steps to build): simplify it or bound its repetitions");
      const uint8_t b = classes.representative[c];
      std::vector<int32_t> target;
      for (int32_t s : sets[d])
        for (const auto& e : nfa.states[static_cast<size_t>(s)].edges)
          if (e.lo <= b && b <= e.hi) target.push_back(e.to);
      out.next.push_back(target.empty() ? kDead : state_of(target));
    }
    std::map<int32_t, std::vector<int32_t>> by_rule;
    for (int32_t s : sets[d])
      for (const auto& call : nfa.states[static_cast<size_t>(s)].calls) by_rule[call.rule].push_back(call.to);
    std::vector<NfaCall> calls;
    for (auto& [rule, target] : by_rule) calls.push_back({rule, state_of(target)});
    out.calls.push_back(std::move(calls));
  }
  return out;
}

std::vector<std::vector<int32_t>> predecessors(const std::vector<int32_t>& next, size_t classes) {
  std::vector<std::vector<int32_t>> into(next.size() / classes);
  for (size_t s = 0; s < into.size(); ++s)
    for (size_t c = 0; c < classes; ++c)
      if (const int32_t t = next[s * classes + c]; t != Subsets::kDead) into[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  return into;
}

bool edge_into(const std::vector<int32_t>& next, size_t classes, size_t s, const std::vector<uint8_t>& flag) {
  for (size_t c = 0; c < classes; ++c)
    if (const int32_t t = next[s * classes + c]; t != Subsets::kDead && flag[static_cast<size_t>(t)]) return true;
  return false;
}

}  // namespace orzo::grammar
