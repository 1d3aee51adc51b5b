#include "grammar/pushdown.hpp"

#include "grammar/byte_dfa.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/nfa.hpp"

#include <algorithm>
#include <set>

namespace orzo::grammar {
namespace {

}  // namespace

size_t Pushdown::KeyHash::operator()(const std::vector<int32_t>& key) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t v : key) h = (h ^ static_cast<uint32_t>(v)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

std::unique_ptr<Pushdown> Pushdown::compile(const Grammar& grammar) {
  const size_t rules = grammar.bodies.size();
  std::vector<Nfa> nfas;
  std::vector<int32_t> accepts;
  nfas.reserve(rules);
  size_t used = 0;  // the rules share ByteDfa's limits
  for (const auto& body : grammar.bodies) {
    nfas.emplace_back(ByteDfa::kMaxNfaStates, used);
    nfas.back().add();
    accepts.push_back(nfas.back().build(*body, 0));
    used += nfas.back().states.size();
  }
  std::vector<const Nfa*> all;
  for (const auto& nfa : nfas) all.push_back(&nfa);
  const ByteClasses classes = ByteClasses::of_edges(all);

  auto p = std::unique_ptr<Pushdown>(new Pushdown());
  p->byte_class_ = classes.of;
  p->classes_ = classes.count;
  size_t total = 0, work = 0;
  for (size_t r = 0; r < rules; ++r) {
    const Subsets sub = Subsets::build(nfas[r], 0, accepts[r], classes, ByteDfa::kMaxDfaStates, total, ByteDfa::kMaxWork, work);
    const auto base = static_cast<int32_t>(total);
    p->rule_start_.push_back(base);
    for (int32_t t : sub.next) p->next_.push_back(t == kDead ? kDead : base + t);
    for (const auto& calls : sub.calls) {
      std::vector<Call> global;
      for (const auto& c : calls) global.push_back({c.rule, base + c.to});
      p->calls_.push_back(std::move(global));
    }
    p->accept_.insert(p->accept_.end(), sub.accepting.begin(), sub.accepting.end());
    total += sub.states();
  }

  // Trim: a state is live when its rule can finish from it, by bytes and by calls of rules
  // that can finish; the rest, and the edges into them, are dropped.
  const auto start_of = [&](int32_t rule) { return static_cast<size_t>(p->rule_start_[static_cast<size_t>(rule)]); };
  // Who depends on whom: a state on the states its bytes lead to, and on the starts and
  // returns of its calls.
  std::vector<std::vector<int32_t>> depends = predecessors(p->next_, p->classes_);
  for (size_t s = 0; s < total; ++s) {
    for (const auto& call : p->calls_[s]) {
      depends[start_of(call.rule)].push_back(static_cast<int32_t>(s));
      depends[static_cast<size_t>(call.to)].push_back(static_cast<int32_t>(s));
    }
  }
  std::vector<uint8_t> live(p->accept_);
  fixpoint(live, depends, [&](size_t s) {
    if (edge_into(p->next_, p->classes_, s, live)) return true;
    for (const auto& call : p->calls_[s])
      if (live[start_of(call.rule)] && live[static_cast<size_t>(call.to)]) return true;
    return false;
  });
  if (!live[0]) throw GrammarError("the constraint matches nothing: no output could satisfy it");
  for (size_t s = 0; s < total; ++s) {
    for (size_t c = 0; c < p->classes_; ++c)
      if (int32_t& t = p->next_[s * p->classes_ + c]; t != kDead && !live[static_cast<size_t>(t)]) t = kDead;
    auto& calls = p->calls_[s];
    calls.erase(std::remove_if(calls.begin(), calls.end(),
                               [&](const Call& c) { return !live[start_of(c.rule)] || !live[static_cast<size_t>(c.to)]; }),
                calls.end());
  }

  // Where a rule may end without another byte: at an accepting state, or before rules that
  // may be empty.
  p->can_end_ = p->accept_;
  fixpoint(p->can_end_, depends, [&](size_t s) {
    for (const auto& call : p->calls_[s])
      if (p->can_end_[start_of(call.rule)] && p->can_end_[static_cast<size_t>(call.to)]) return true;
    return false;
  });

  // Left recursion: the rules each rule may call before reading a byte (through rules that
  // may be empty), and a rule among its own.
  std::vector<std::vector<int32_t>> first_calls(rules);
  for (size_t r = 0; r < rules; ++r) {
    std::vector<size_t> stack{start_of(static_cast<int32_t>(r))};
    std::set<size_t> seen;
    while (!stack.empty()) {
      const size_t s = stack.back();
      stack.pop_back();
      if (!seen.insert(s).second) continue;
      for (const auto& call : p->calls_[s]) {
        first_calls[r].push_back(call.rule);
        if (p->can_end_[start_of(call.rule)]) stack.push_back(static_cast<size_t>(call.to));
      }
    }
  }
  for (size_t r = 0; r < rules; ++r) {
    std::vector<uint8_t> seen(rules, 0);
    std::vector<int32_t> stack(first_calls[r]);
    while (!stack.empty()) {
      const auto q = static_cast<size_t>(stack.back());
      stack.pop_back();
      if (q == r)
        throw GrammarError("grammar: the rule '" + grammar.names[r] + "' is left-recursive (it reaches itself before any text)");
      if (seen[q]) continue;
      seen[q] = 1;
      for (int32_t t : first_calls[q]) stack.push_back(t);
    }
  }

  std::vector<Stack> first{Stack{p->rule_start_[0]}};
  p->intern(first);
  return p;
}

int32_t Pushdown::intern(std::vector<Stack>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacks) stacks.resize(kMaxStacks);
  std::vector<int32_t> key;
  for (const Stack& s : stacks) {
    key.push_back(static_cast<int32_t>(s.size()));
    key.insert(key.end(), s.begin(), s.end());
  }
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (keys_.size() >= kMaxConfigurations) return kDead;
  // It accepts when some stack can end in every rule it holds.
  const bool accepting = std::any_of(stacks.begin(), stacks.end(), [&](const Stack& s) {
    return std::all_of(s.begin(), s.end(), [&](int32_t f) { return can_end_[static_cast<size_t>(f)] != 0; });
  });
  const auto id = static_cast<int32_t>(keys_.size());
  ids_.emplace(key, id);
  keys_.push_back(std::move(key));
  accepting_.push_back(accepting ? 1 : 0);
  moves_.resize(moves_.size() + classes_, kUnknown);
  return id;
}

bool Pushdown::accepting(int32_t configuration) const {
  if (configuration == kDead) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return accepting_[static_cast<size_t>(configuration)] != 0;
}

size_t Pushdown::configurations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_.size();
}

int32_t Pushdown::step_locked(int32_t configuration, uint8_t byte) const {
  if (configuration == kDead) return kDead;
  const size_t cls = byte_class_[byte];
  const size_t move = static_cast<size_t>(configuration) * classes_ + cls;
  if (moves_[move] != kUnknown) return moves_[move];
  // Each stack tries the byte in its top state, in every rule that state may call (pushed),
  // and, where its rule may end, back in the state it returns to (popped).
  std::vector<Stack> work;
  const std::vector<int32_t>& key = keys_[static_cast<size_t>(configuration)];
  for (size_t at = 0; at < key.size(); at += static_cast<size_t>(key[at]) + 1)
    work.emplace_back(key.begin() + static_cast<std::ptrdiff_t>(at + 1), key.begin() + static_cast<std::ptrdiff_t>(at + 1 + static_cast<size_t>(key[at])));
  std::set<Stack> tried;
  std::vector<Stack> after;
  while (!work.empty()) {
    Stack stack = std::move(work.back());
    work.pop_back();
    if (!tried.insert(stack).second) continue;
    const auto top = static_cast<size_t>(stack.back());
    if (const int32_t t = next_[top * classes_ + cls]; t != kDead) {
      after.push_back(stack);
      after.back().back() = t;
    }
    if (stack.size() < kMaxDepth)
      for (const Call& call : calls_[top]) {
        Stack pushed = stack;
        pushed.back() = call.to;
        pushed.push_back(rule_start_[static_cast<size_t>(call.rule)]);
        work.push_back(std::move(pushed));
      }
    if (accept_[top] && stack.size() > 1) {
      stack.pop_back();
      work.push_back(std::move(stack));
    }
  }
  const int32_t to = after.empty() ? kDead : intern(after);
  moves_[move] = to;
  return to;
}

}  // namespace orzo::grammar
