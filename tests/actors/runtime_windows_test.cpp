// The actor runtime on models that interleave sliding-window and global layers (the gemma2
// and gemma3 fixtures, windows of 8 positions): the sliding layers keep only their window's
// KV in block tables of their own (core/kv_layout.hpp), which give blocks back as sequences
// move on. A request's greedy output is the same as the bare forward pass over one table for
// every layer, alone, with 63 others, under preemption, with its prompt served from the
// prefix cache, with async scheduling and split over two workers. Prompts run to 60 tokens
// and continuations to 40, far past the windows.

#include "tests/support/actor_harness.hpp"
#include "tests/support/greedy_cases.hpp"

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "stages/stage_factory.hpp"

#include <gtest/gtest.h>

#include <random>

namespace orzo {
namespace {

constexpr int kRequests = 64;
constexpr int kGenerate = 40;
constexpr int32_t kVocab = 128;

// 64 prompts of 1 to 60 tokens, the first 16 sharing a 40-token stem (prefix-cache hits),
// with their greedy continuations.
const std::vector<testing::GreedyCase>& cases(const std::string& model_name) {
  return testing::fixture_cases(
      model_name,
      [] {
        std::mt19937 rng(11);
        std::vector<int32_t> stem(40);
        for (auto& id : stem) id = static_cast<int32_t>(3 + rng() % (kVocab - 3));
        std::vector<std::vector<int32_t>> prompts;
        for (int i = 0; i < kRequests; ++i) {
          auto tail = testing::random_prompt(rng, 20, kVocab);
          prompts.push_back(i < 16 ? stem : std::vector<int32_t>{});
          prompts.back().insert(prompts.back().end(), tail.begin(), tail.end());
        }
        return prompts;
      },
      kGenerate, kVocab);
}

struct EngineSetup {
  std::string placement = "cpu";
  int32_t kv_blocks = 1024;
  bool prefix_caching = true;
  bool async_scheduling = false;
};

class RuntimeWindows : public ::testing::TestWithParam<std::string> {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};

  std::unique_ptr<Engine> start(const EngineSetup& s) {
    EngineOptions o;
    o.model = testing::fixture_path(GetParam());
    o.placement = s.placement;
    o.backend.threads = 1;
    o.kv_blocks = s.kv_blocks;
    o.prefix_caching = s.prefix_caching;
    o.async_scheduling = s.async_scheduling;
    o.load_tokenizer = false;  // random-weight fixtures: ids in, ids out
    o.scheduler.max_num_seqs = kRequests;
    o.scheduler.max_num_batched_tokens = 64;
    return Engine::start(sys, o);
  }

  void run_all(Engine& engine, int first, int last) { testing::expect_greedy(engine, cases(GetParam()), first, last); }
};

TEST_P(RuntimeWindows, TheEngineKeepsSlidingLayersApart) {
  const auto model = Model::load(testing::fixture_path(GetParam()));
  StageTerms terms{0, 16, 64, 4, 256, {}};
  const KvLayout layout = kv_layout_for(model->config(), terms);
  EXPECT_GT(layout.groups(), 1);
  for (size_t g = 1; g < layout.windows.size(); ++g) EXPECT_EQ(layout.windows[g], 8);
  // Every block holds one plane (one layer of a group) where the flat layout holds them all.
  EXPECT_EQ(layout.planes_for(0, model->config().num_layers), 1);
  // A context no longer than the window keeps one table.
  terms.max_model_len = 8;
  EXPECT_EQ(kv_layout_for(model->config(), terms).windows, std::vector<int32_t>{0});
  terms.kv_windows = {0, 4};
  EXPECT_THROW(kv_layout_for(model->config(), terms), std::invalid_argument);
}

TEST_P(RuntimeWindows, AloneEqualsTheBareForwardPass) {
  auto engine = start({});
  for (int i = 14; i < 18; ++i) run_all(*engine, i, i + 1);  // the last two with the stem, then without
}

TEST_P(RuntimeWindows, SixtyFourTogetherEqualAlone) {
  auto engine = start({});
  run_all(*engine, 0, kRequests);
  const auto stats = testing::stats_of(sys, engine->batcher());
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST_P(RuntimeWindows, PrefixHitsAndPreemptionDoNotChangeOutputs) {
  // The 16 stem prompts again, now cached; then all 64 in a pool that forces preemption.
  auto engine = start({"cpu", 1024});
  run_all(*engine, 0, 16);
  run_all(*engine, 0, 16);
  auto tight = start({"cpu", 200});
  run_all(*tight, 0, kRequests);
  const auto stats = testing::stats_of(sys, tight->batcher());
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST_P(RuntimeWindows, AsyncSchedulingAndTwoWorkersEqualOne) {
  auto async = start({"cpu", 200, true, true});
  run_all(*async, 0, kRequests);
  EXPECT_GT(testing::stats_of(sys, async->batcher()).preemptions, 0u);
  const auto layers = Model::load(testing::fixture_path(GetParam()))->config().num_layers;
  auto split = start({"cpu:0-1,cpu:1-" + std::to_string(layers), 1024});
  run_all(*split, 0, kRequests);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RuntimeWindows, ::testing::Values("gemma2", "gemma3"));

}  // namespace
}  // namespace orzo
