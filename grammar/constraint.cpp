#include "grammar/constraint.hpp"

#include "grammar/gbnf.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/regex_parser.hpp"
#include "grammar/tool_calls.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace orzo::grammar {
namespace {

RegexPtr choice_regex(const std::string& text) {
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw GrammarError("choice: not a JSON list of strings");
  }
  if (!list.is_array() || list.empty()) throw GrammarError("choice: the list of choices must not be empty");
  std::vector<RegexPtr> options;
  for (const auto& item : list) {
    if (!item.is_string()) throw GrammarError("choice: every choice must be a string");
    options.push_back(literal(item.get<std::string>()));
  }
  return alt(std::move(options));
}

// What identifies a compiled constraint: its kind, strictness and text.
std::string constraint_key(const OutputConstraint& c) {
  return std::to_string(static_cast<int>(c.kind)) + (c.strict ? "s:" : ":") + c.text;
}

}  // namespace

Automaton compile_automaton(const OutputConstraint& c) {
  switch (c.kind) {
    case OutputConstraint::Kind::regex: return Automaton::compile(parse_regex(c.text));
    case OutputConstraint::Kind::json_schema: return Automaton::compile(json_schema_grammar(c.text, c.strict));
    case OutputConstraint::Kind::json_object: return Automaton::compile(json_object_grammar());
    case OutputConstraint::Kind::choice: return Automaton::compile(choice_regex(c.text));
    case OutputConstraint::Kind::grammar: return Automaton::compile(parse_gbnf(c.text));
    case OutputConstraint::Kind::tool_calls: return Automaton::compile(tool_calls_grammar(c.text));
    case OutputConstraint::Kind::none: break;
  }
  throw GrammarError("no constraint to compile");
}

std::optional<std::string> constraint_problem(const OutputConstraint& constraint) {
  if (constraint.kind == OutputConstraint::Kind::none) return std::nullopt;
  static std::mutex mutex;
  static std::unordered_map<std::string, std::optional<std::string>> verdicts;
  constexpr size_t kRemembered = 256;
  const std::string key = constraint_key(constraint);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = verdicts.find(key); it != verdicts.end()) return it->second;
  }
  std::optional<std::string> problem;
  try {
    compile_automaton(constraint);
  } catch (const GrammarError& e) {
    problem = e.what();
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (verdicts.size() >= kRemembered) verdicts.clear();
  verdicts.emplace(key, problem);
  return problem;
}

CompiledConstraint::CompiledConstraint(Automaton automaton, std::shared_ptr<const Vocabulary> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {}

std::shared_ptr<const TokenMask> CompiledConstraint::mask(int32_t state) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  }
  std::shared_ptr<const TokenMask> built = build(state);
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_.emplace(state, std::move(built)).first->second;
}

bool CompiledConstraint::has_mask(int32_t state) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_.count(state) > 0;
}

size_t CompiledConstraint::masks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masks_.size();
}

std::shared_ptr<TokenMask> CompiledConstraint::build(int32_t state) const {
  auto m = std::make_shared<TokenMask>();
  m->words.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  const auto set = [&](int32_t id) { m->words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  if (state == Automaton::kDead) return m;
  const auto& nodes = vocab_->nodes();
  const auto& tokens = vocab_->node_tokens();
  // Depth first through the trie, each node with the state its path leaves: a dead state
  // prunes everything spelled after it.
  automaton_.walking([&](auto step) {
    std::vector<std::pair<int32_t, int32_t>> stack{{0, state}};
    while (!stack.empty()) {
      const auto [node, at] = stack.back();
      stack.pop_back();
      const auto& n = nodes[static_cast<size_t>(node)];
      for (int32_t c = n.child_begin; c < n.child_end; ++c) {
        const auto& child = nodes[static_cast<size_t>(c)];
        const int32_t next = step(at, child.byte);
        if (next == Automaton::kDead) continue;
        for (int32_t t = child.token_begin; t < child.token_end; ++t) set(tokens[static_cast<size_t>(t)]);
        if (child.child_begin < child.child_end) stack.emplace_back(c, next);
      }
    }
  });
  if (automaton_.accepting(state))
    for (int32_t id : vocab_->eos())
      if (id >= 0 && id < vocab_->size()) set(id);
  for (uint64_t w : m->words) m->allowed += __builtin_popcountll(w);
  return m;
}

bool CompiledConstraint::is_eos(int32_t token) const {
  const auto& eos = vocab_->eos();
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

int32_t CompiledConstraint::advance(int32_t state, int32_t token) const {
  if (state == Automaton::kDead) return state;
  if (is_eos(token)) return automaton_.accepting(state) ? state : Automaton::kDead;
  if (!vocab_->constrainable(token)) return Automaton::kDead;
  return automaton_.walk(state, vocab_->bytes(token));
}

std::shared_ptr<const CompiledConstraint> ConstraintCache::get(const OutputConstraint& constraint) {
  const std::string key = constraint_key(constraint);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      if (it->second.compiled->masks() <= max_masks_) {
        it->second.used = ++clock_;
        return it->second.compiled;
      }
      entries_.erase(it);
    }
  }
  auto compiled = std::make_shared<const CompiledConstraint>(compile_automaton(constraint), vocab_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= capacity_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    entries_.erase(oldest);
  }
  auto& entry = entries_[key];
  if (!entry.compiled) entry.compiled = std::move(compiled);
  entry.used = ++clock_;
  return entry.compiled;
}

bool ConstraintMatcher::advance(int32_t token) {
  state_ = compiled_->advance(state_, token);
  return state_ != Automaton::kDead;
}

}  // namespace orzo::grammar
