// The actor runtime on Mixture-of-Experts models (the qwen2moe and qwen3moe fixtures): a
// request's greedy output is the same alone, with 63 others (whose rows then share its
// experts in every step), under preemption and with the model split over two workers. The
// reference is the bare forward pass, one sequence at a time.

#include "tests/support/actor_harness.hpp"
#include "tests/support/model_harness.hpp"

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace orzo {
namespace {

constexpr int kRequests = 64;
constexpr int kGenerate = 40;
constexpr int32_t kVocab = 128;

std::string fixture(const std::string& name) { return std::string(ORZO_FIXTURES_DIR) + "/" + name; }

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int32_t> expected;
};

// 64 prompts of 1 to 60 tokens of the fixture's vocabulary, with their greedy continuations.
const std::vector<Case>& cases(const std::string& model_name) {
  static std::map<std::string, std::vector<Case>> by_model;
  auto& out = by_model[model_name];
  if (!out.empty()) return out;
  auto model = Model::load(fixture(model_name));
  CpuBackend::Options o;
  o.kv_blocks = 8;
  o.threads = 1;
  CpuBackend backend(model, o);
  testing::Pipeline pipeline({&backend}, 8);
  std::mt19937 rng(7);
  for (int i = 0; i < kRequests; ++i) {
    Case c;
    const auto length = 1 + rng() % 60;
    for (size_t k = 0; k < length; ++k) c.prompt.push_back(static_cast<int32_t>(3 + rng() % (kVocab - 3)));
    c.expected = pipeline.greedy(0, c.prompt, kGenerate, kVocab);
    out.push_back(std::move(c));
  }
  return out;
}

class RuntimeExperts : public ::testing::TestWithParam<std::string> {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};

  std::unique_ptr<Engine> start(const std::string& placement, int32_t kv_blocks) {
    EngineOptions o;
    o.model = fixture(GetParam());
    o.placement = placement;
    o.backend.threads = 1;
    o.kv_blocks = kv_blocks;
    o.prefix_caching = false;
    o.load_tokenizer = false;  // random-weight fixtures: ids in, ids out
    o.scheduler.max_num_seqs = kRequests;
    o.scheduler.max_num_batched_tokens = 256;
    return Engine::start(sys, o);
  }

  // Sends requests [first, last) at once and checks every output against the reference.
  void run_all(Engine& engine, int first, int last) {
    const auto& all_cases = cases(GetParam());
    testing::Collector c;
    for (int i = first; i < last; ++i) {
      SessionRequest r;
      r.id = "r" + std::to_string(i);
      r.prompt_ids = all_cases[static_cast<size_t>(i)].prompt;
      r.sampling.temperature = 0;
      r.limits.max_tokens = kGenerate;
      r.limits.ignore_eos = true;
      engine.generate(r, c.callbacks(r.id));
    }
    ASSERT_TRUE(c.wait(static_cast<size_t>(last - first), std::chrono::seconds(300)));
    auto outcomes = c.outcomes();
    for (int i = first; i < last; ++i) {
      const auto& o = outcomes["r" + std::to_string(i)];
      EXPECT_EQ(o.completions.size(), 1u) << i;
      EXPECT_EQ(o.tokens, all_cases[static_cast<size_t>(i)].expected) << "request " << i;
    }
  }
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
  auto engine = start("cpu:0-1,cpu:1-" + std::to_string(Model::load(fixture(GetParam()))->config().num_layers), 1024);
  run_all(*engine, 0, kRequests);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RuntimeExperts, ::testing::Values("qwen2moe", "qwen3moe"));

}  // namespace
}  // namespace orzo
