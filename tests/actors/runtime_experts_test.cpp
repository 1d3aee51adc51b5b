// The actor runtime on Mixture-of-Experts models (the qwen2moe and qwen3moe fixtures): a
// request's greedy output is the same alone, with 63 others (whose rows then share its
// experts in every step), under preemption and with the model split over two workers. The
// reference is the bare forward pass, one sequence at a time.

#include "tests/support/actor_harness.hpp"
#include "tests/support/greedy_cases.hpp"

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"

#include <gtest/gtest.h>

#include <random>

namespace orzo {
namespace {

constexpr int kRequests = 64;
constexpr int kGenerate = 40;
constexpr int32_t kVocab = 128;

// 64 prompts of 1 to 60 tokens of the fixture's vocabulary, with their greedy continuations.
const std::vector<testing::GreedyCase>& cases(const std::string& model_name) {
  return testing::fixture_cases(
      model_name,
      [] {
        std::mt19937 rng(7);
        std::vector<std::vector<int32_t>> prompts;
        for (int i = 0; i < kRequests; ++i) prompts.push_back(testing::random_prompt(rng, 60, kVocab));
        return prompts;
      },
      kGenerate, kVocab);
}

class RuntimeExperts : public ::testing::TestWithParam<std::string> {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};

  std::unique_ptr<Engine> start(const std::string& placement, int32_t kv_blocks) {
    EngineOptions o;
    o.model = testing::fixture_path(GetParam());
    o.placement = placement;
    o.backend.threads = 1;
    o.kv_blocks = kv_blocks;
    o.prefix_caching = false;
    o.load_tokenizer = false;  // random-weight fixtures: ids in, ids out
    o.scheduler.max_num_seqs = kRequests;
    o.scheduler.max_num_batched_tokens = 256;
    return Engine::start(sys, o);
  }

  void run_all(Engine& engine, int first, int last) { testing::expect_greedy(engine, cases(GetParam()), first, last); }
};

TEST_P(RuntimeExperts, AloneEqualsTheBareForwardPass) {
  auto engine = start("cpu", 256);
  for (int i = 0; i < 4; ++i) run_all(*engine, i, i + 1);
}

TEST_P(RuntimeExperts, SixtyFourTogetherEqualAlone) {
  auto engine = start("cpu", 1024);
  run_all(*engine, 0, kRequests);
}

TEST_P(RuntimeExperts, PreemptionDoesNotChangeOutputs) {
  // 64 sequences of up to 100 tokens need ~400 blocks of 16; 40 force preemption.
  auto engine = start("cpu", 40);
  run_all(*engine, 0, kRequests);
  const auto stats = testing::stats_of(sys, engine->batcher());
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST_P(RuntimeExperts, TwoWorkersEqualOne) {
  auto engine = start("cpu:0-1,cpu:1-" + std::to_string(Model::load(testing::fixture_path(GetParam()))->config().num_layers), 1024);
  run_all(*engine, 0, kRequests);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RuntimeExperts, ::testing::Values("qwen2moe", "qwen3moe"));

}  // namespace
}  // namespace orzo
