// A completion continues its prompt: what a client appends to its prompt text reads as the
// model's ids decoded together, whether the first generated word begins with a space or not.

#include "tests/support/actor_harness.hpp"

#include "actors/engine.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace orzo {
namespace {

// Runs 20 prompts greedily on `model` and holds each completion's text to the decoding of
// prompt and completion ids together; returns how many completions begin with a space.
int expect_continuations(const std::string& model, const std::vector<std::string>& prompts) {
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
  EngineOptions o;
  o.model = model;
  o.backend.threads = 1;
  auto engine = Engine::start(sys, o);
  testing::Collector collector;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionRequest r;
    r.id = "c" + std::to_string(i);
    r.prompt_ids = engine->tokenize(prompts[i]);
    r.sampling.temperature = 0;
    r.limits.max_tokens = 24;
    engine->generate(std::move(r), collector.callbacks("c" + std::to_string(i)));
  }
  EXPECT_TRUE(collector.wait(prompts.size()));
  const auto outcomes = collector.outcomes();
  int spaced = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& out = outcomes.at("c" + std::to_string(i));
    std::vector<int32_t> all = engine->tokenize(prompts[i]);
    all.insert(all.end(), out.tokens.begin(), out.tokens.end());
    EXPECT_EQ(prompts[i] + out.text, engine->tokenizer()->decode(all)) << prompts[i];
    spaced += !out.text.empty() && out.text.front() == ' ';
  }
  return spaced;
}

// A SentencePiece decoder strips the space at the start of a text: the case that broke.
TEST(Continuation, PromptTextPlusCompletionIsTheDecodeOfAllTheIds) {
  const int spaced = expect_continuations(
      std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf",
      {"The little dog", "Once upon a time", "Lily and Tom", "One day, a", "The sun was", "Tim had a big",
       "She looked at the", "They went to the park and", "The cat", "Mom said", "A bird", "He was very",
       "Sue wanted to", "The boy saw a", "In the garden", "Ben liked", "The old man", "It was a sunny",
       "Anna found a", "The tree"});
  EXPECT_GT(spaced, 10) << "most continuations of these prompts begin with a word";
}

// A byte-level BPE (SmolLM2's GPT-2 style vocabulary) carries the space inside its tokens.
TEST(Continuation, ByteLevelModelContinuesItsPrompt) {
  const std::string model =
      std::string(ORZO_SHARED_DIR) + "/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is absent";
  const int spaced = expect_continuations(
      model, {"The capital of France is", "Once upon a time", "The best way to learn", "My favorite food is",
              "Water boils at", "The sun rises in the", "Python is a", "In 1969, the first", "The largest planet",
              "A good friend", "To make bread, you", "The color of the sky", "Cats and dogs", "The ocean is",
              "Music can", "The train left the", "Scientists discovered", "Every morning I", "The recipe calls for",
              "Mountains are"});
  EXPECT_GT(spaced, 10) << "most continuations of these prompts begin with a word";
}

}  // namespace
}  // namespace orzo
