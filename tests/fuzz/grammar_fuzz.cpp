// libFuzzer entry point for the constraint compilers (grammar/): the first byte picks a
// regular expression, a JSON schema or a GBNF grammar, the rest is its text. Each must compile
// or throw GrammarError; what compiles must hold the automaton's promises (every live state
// can still end: a DFA's every state, a pushdown automaton's every configuration met), and
// the token mask over a small vocabulary must agree with walking each token's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grammar/constraint.hpp"
#include "grammar/grammar_error.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

std::shared_ptr<const orzo::grammar::Vocabulary> vocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* piece : {"{\"", "\":", "true", "null", "12", ", ", "ab", "\xC3\xA9", "\xE4\xB8", "</s>"})
      bytes.emplace_back(piece);
    std::vector<uint8_t> special(bytes.size(), 0);
    special.back() = 1;
    return std::make_shared<const orzo::grammar::Vocabulary>(
        bytes, special, std::vector<int32_t>{static_cast<int32_t>(bytes.size() - 1)}, static_cast<int32_t>(bytes.size()));
  }();
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using Kind = orzo::OutputConstraint::Kind;
  const Kind kinds[] = {Kind::regex, Kind::json_schema, Kind::grammar, Kind::choice, Kind::tool_calls};
  orzo::OutputConstraint c{kinds[data[0] % 5], std::string(reinterpret_cast<const char*>(data + 1), size - 1),
                           (data[0] & 0x80) != 0};
  std::unique_ptr<orzo::grammar::CompiledConstraint> compiled;
  try {
    compiled = std::make_unique<orzo::grammar::CompiledConstraint>(orzo::grammar::compile_automaton(c), vocabulary());
  } catch (const orzo::grammar::GrammarError&) {
    return 0;
  }
  const auto& automaton = compiled->automaton();
  if (const auto* dfa = automaton.dfa())
    for (int32_t s = 0; s < static_cast<int32_t>(dfa->states()); ++s) check(dfa->accepting(s) || dfa->continues(s));
  // Walk a few steps by the first allowed token, checking the mask against each token's bytes.
  int32_t state = compiled->start();
  for (int step = 0; step < 6 && state != orzo::grammar::Automaton::kDead; ++step) {
    const auto mask = compiled->mask(state);
    check(mask->allowed > 0);  // no dead end
    int32_t first = -1;
    for (int32_t id = 0; id < vocabulary()->size(); ++id) {
      const bool ok = compiled->is_eos(id) ? automaton.accepting(state)
                                           : vocabulary()->constrainable(id) &&
                                                 automaton.walk(state, vocabulary()->bytes(id)) != orzo::grammar::Automaton::kDead;
      check(mask->allows(id) == ok);
      if (ok && first < 0 && !compiled->is_eos(id)) first = id;
    }
    if (first < 0) break;
    state = compiled->advance(state, first);
    check(state != orzo::grammar::Automaton::kDead);
  }
  return 0;
}
