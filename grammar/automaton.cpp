#include "grammar/automaton.hpp"

namespace orzo::grammar {

Automaton Automaton::compile(const Grammar& grammar) {
  const Grammar inlined = grammar.inlined();
  Automaton a;
  if (inlined.regular())
    a.dfa_ = std::make_shared<const ByteDfa>(ByteDfa::compile(inlined.bodies[0]));
  else
    a.pushdown_ = Pushdown::compile(inlined);
  return a;
}

int32_t Automaton::walk(int32_t state, const std::string& bytes) const {
  walking([&](auto step) {
    for (const char c : bytes) {
      if (state == kDead) break;
      state = step(state, static_cast<uint8_t>(c));
    }
  });
  return state;
}

}  // namespace orzo::grammar
