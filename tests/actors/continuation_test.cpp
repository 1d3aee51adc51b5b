// A completion continues its prompt: what a client appends to its prompt text reads as the
// model's ids decoded together, whether the first generated word begins with a space or not.

#include "tests/support/actor_harness.hpp"

#include "actors/engine.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orzo {
namespace {

TEST(Continuation, PromptTextPlusCompletionIsTheDecodeOfAllTheIds) {
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
  EngineOptions o;
  o.model = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  o.backend.threads = 1;
  auto engine = Engine::start(sys, o);
  const std::vector<std::string> prompts = {
      "The little dog", "Once upon a time", "Lily and Tom", "One day, a", "The sun was", "Tim had a big",
      "She looked at the", "They went to the park and", "The cat", "Mom said", "A bird", "He was very",
      "Sue wanted to", "The boy saw a", "In the garden", "Ben liked", "The old man", "It was a sunny",
      "Anna found a", "The tree"};
  testing::Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionRequest r;
    r.id = "c" + std::to_string(i);
    r.prompt_ids = engine->tokenize(prompts[i]);
    r.sampling.temperature = 0;
    r.limits.max_tokens = 24;
    engine->generate(std::move(r), collector.callbacks("c" + std::to_string(i)));
  }
  ASSERT_TRUE(collector.wait(prompts.size()));
  const auto outcomes = collector.outcomes();
  int spaced = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& out = outcomes.at("c" + std::to_string(i));
    std::vector<int32_t> all = engine->tokenize(prompts[i]);
    all.insert(all.end(), out.tokens.begin(), out.tokens.end());
    EXPECT_EQ(prompts[i] + out.text, engine->tokenizer()->decode(all)) << prompts[i];
    spaced += !out.text.empty() && out.text.front() == ' ';
  }
  EXPECT_GT(spaced, 10) << "most continuations of these prompts begin with a word";
}

}  // namespace
}  // namespace orzo
