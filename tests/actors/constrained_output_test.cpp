// Output constraints through the actors on stories260K: every constrained output matches its
// constraint and ends on its own, batched with unconstrained requests, under preemption and
// with the model split over two workers; a sampling stage without a vocabulary ends a
// constrained request with a clear error, and its neighbours are untouched.

#include "tests/support/actor_harness.hpp"

#include "actors/engine.hpp"
#include "grammar/constraint.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orzo {
namespace {

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

const std::vector<OutputConstraint>& constraints() {
  static const std::vector<OutputConstraint> all = {
      {OutputConstraint::Kind::regex, " (yes|no)", false},
      {OutputConstraint::Kind::regex, " [a-z]{2,8}( [a-z]{2,8}){0,3}\\.", false},
      {OutputConstraint::Kind::choice, R"([" red"," green"," blue"])", false},
      {OutputConstraint::Kind::json_schema,
       R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},"w":{"type":"string","maxLength":6}},"required":["n","w"]})",
       false},
      {OutputConstraint::Kind::grammar, "root ::= \" \" [0-9]{1,3} (\" + \" [0-9]{1,3})? \" =\"", false},
  };
  return all;
}

class ConstrainedOutput : public ::testing::Test {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};

  std::unique_ptr<Engine> start(const std::string& placement, int32_t kv_blocks, bool tokenizer = true) {
    EngineOptions o;
    o.model = kModel;
    o.placement = placement;
    o.backend.threads = 1;
    o.kv_blocks = kv_blocks;
    o.load_tokenizer = tokenizer;
    o.scheduler.max_num_seqs = 32;
    return Engine::start(sys, o);
  }

  // 20 constrained requests among 10 that are not, at temperature 1; each output must match.
  void run(Engine& engine) {
    testing::Collector c;
    for (int i = 0; i < 30; ++i) {
      SessionRequest r;
      r.id = "r" + std::to_string(i);
      r.prompt_ids = engine.tokenize("Once upon a time, the answer was", true);
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(i);
      if (i % 3 != 2) r.sampling.constraint = constraints()[static_cast<size_t>(i) % constraints().size()];
      r.limits.max_tokens = 120;  // within the 12-block pool of the preemption case
      engine.generate(std::move(r), c.callbacks("r" + std::to_string(i)));
    }
    ASSERT_TRUE(c.wait(30, std::chrono::seconds(120)));
    auto all = c.outcomes();
    for (int i = 0; i < 30; ++i) {
      if (i % 3 == 2) continue;
      const auto& o = all["r" + std::to_string(i)];
      const auto& constraint = constraints()[static_cast<size_t>(i) % constraints().size()];
      SCOPED_TRACE(::testing::Message() << "request " << i << ": '" << o.text << "' for " << constraint.text);
      ASSERT_EQ(o.completions.size(), 1u);
      EXPECT_EQ(o.completions[0].reason, FinishReason::eos);
      EXPECT_TRUE(grammar::compile_automaton(constraint).matches(o.text));
    }
  }
};

TEST_F(ConstrainedOutput, EveryOutputMatchesItsConstraint) {
  auto engine = start("cpu", 256);
  run(*engine);
}

TEST_F(ConstrainedOutput, UnderPreemptionAndSplitOverTwoWorkers) {
  auto engine = start("cpu:0-2,cpu:2-5", 12);
  run(*engine);
  EXPECT_GT(testing::stats_of(sys, engine->batcher()).preemptions, 0u);
}

// A recursive grammar nests as deep as the draws take it (a pushdown automaton, where an
// unrolling stopped at 5): with "(" favoured, 40 tokens are 40 open brackets, each output so
// far a prefix the grammar can still close; unfavoured, the output closes and ends.
TEST_F(ConstrainedOutput, RecursiveGrammarsNestAsDeepAsTheDrawsGo) {
  auto engine = start("cpu:0-2,cpu:2-5", 256);
  const OutputConstraint nested{OutputConstraint::Kind::grammar, "root ::= \"(\" root \")\" | \"x\"", false};
  constexpr int32_t kOpen = 489;  // stories260K's "(" (tokenizer.ggml.tokens), which no merge extends
  testing::Collector c;
  for (int i = 0; i < 2; ++i) {
    SessionRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt_ids = engine->tokenize("Once upon a time", true);
    r.sampling.temperature = 0;
    r.sampling.constraint = nested;
    if (i == 0) r.sampling.logit_bias = {{kOpen, 100.0f}};
    r.limits.max_tokens = 40;
    engine->generate(std::move(r), c.callbacks("r" + std::to_string(i)));
  }
  ASSERT_TRUE(c.wait(2, std::chrono::seconds(60)));
  auto all = c.outcomes();
  const auto automaton = grammar::compile_automaton(nested);
  EXPECT_EQ(all["r0"].text, std::string(40, '('));
  EXPECT_EQ(all["r0"].completions.at(0).reason, FinishReason::length);
  EXPECT_NE(automaton.walk(automaton.start(), all["r0"].text), grammar::Automaton::kDead);
  EXPECT_EQ(all["r1"].completions.at(0).reason, FinishReason::eos);
  EXPECT_TRUE(automaton.matches(all["r1"].text)) << all["r1"].text;
}

TEST_F(ConstrainedOutput, WithoutAVocabularyTheRequestFailsAndNoOther) {
  auto engine = start("cpu", 64, /*tokenizer=*/false);
  testing::Collector c;
  for (int i = 0; i < 2; ++i) {
    SessionRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt_ids = {1, 403, 407};
    r.sampling.temperature = 0;
    if (i == 0) r.sampling.constraint = constraints()[0];
    r.limits.max_tokens = 5;
    r.limits.ignore_eos = true;
    engine->generate(std::move(r), c.callbacks("r" + std::to_string(i)));
  }
  ASSERT_TRUE(c.wait(2));
  auto all = c.outcomes();
  const Completion& failed = all["r0"].completions.at(0);
  EXPECT_EQ(failed.reason, FinishReason::error);
  EXPECT_EQ(failed.error, ErrorCode::invalid_request);
  EXPECT_NE(failed.message.find("output constraint"), std::string::npos) << failed.message;
  EXPECT_EQ(all["r1"].completions.at(0).reason, FinishReason::length);
  EXPECT_EQ(all["r1"].tokens.size(), 5u);
}

}  // namespace
}  // namespace orzo
