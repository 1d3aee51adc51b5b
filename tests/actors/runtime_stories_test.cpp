// The actor runtime on a real model (stories260K): a request's greedy output is the same
// whether it runs alone or with 63 others, with or without preemption, on one worker or with
// the model split over two or three, and with or without prefix-cache hits, each stepping one
// step at a time and planning ahead (async scheduling). The reference is the bare forward
// pass, one sequence at a time, with no actors at all.

#include "tests/support/actor_harness.hpp"
#include "tests/support/model_harness.hpp"

#include "actors/engine.hpp"
#include "actors/output_constraints.hpp"
#include "actors/worker.hpp"
#include "protocol/errors.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "stages/stage_factory.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace orzo {
namespace {

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int kRequests = 64;
constexpr int kGenerate = 40;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int32_t> expected;
};

// 64 prompts of 1 to 60 tokens; half of them share a 37-token prefix so that prefix
// caching has something to find.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    auto model = Model::load(kModel);
    CpuBackend::Options o;
    o.kv_blocks = 8;
    o.threads = 1;
    CpuBackend backend(model, o);
    testing::Pipeline pipeline({&backend}, 8);
    std::mt19937 rng(99);
    std::vector<int32_t> shared(37);
    for (auto& t : shared) t = static_cast<int32_t>(3 + rng() % 509);
    std::vector<Case> out;
    for (int i = 0; i < kRequests; ++i) {
      Case c;
      if (i % 2 == 0) c.prompt = shared;
      const auto extra = 1 + rng() % 23;
      for (size_t k = 0; k < extra; ++k) c.prompt.push_back(static_cast<int32_t>(3 + rng() % 509));
      c.expected = pipeline.greedy(0, c.prompt, kGenerate, 512);
      out.push_back(std::move(c));
    }
    return out;
  }();
  return all;
}

SessionRequest request(int i) {
  SessionRequest r;
  r.id = "r" + std::to_string(i);
  r.prompt_ids = cases()[static_cast<size_t>(i)].prompt;
  r.sampling.temperature = 0;
  r.limits.max_tokens = kGenerate;
  r.limits.ignore_eos = true;
  return r;
}

class StoriesEngine : public ::testing::Test {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
  worker_actor engine_worker_;  // a stage that joined the engine from this process
  bool async_scheduling_ = false;

  std::unique_ptr<Engine> start(const std::string& placement, int32_t kv_blocks, bool prefix_caching = true,
                                int32_t replicas = 1) {
    EngineOptions o;
    o.model = kModel;
    o.placement = placement;
    o.replicas = replicas;
    o.async_scheduling = async_scheduling_;
    o.backend.threads = 1;
    o.kv_blocks = kv_blocks;
    o.prefix_caching = prefix_caching;
    o.scheduler.max_num_seqs = kRequests;
    o.scheduler.max_num_batched_tokens = 256;
    return Engine::start(sys, o);
  }

  // Sends requests [first, last) at once and checks every output against the reference.
  std::map<std::string, testing::Outcome> run_all(Engine& engine, int first, int last) {
    testing::Collector c;
    for (int i = first; i < last; ++i) engine.generate(request(i), c.callbacks("r" + std::to_string(i)));
    EXPECT_TRUE(c.wait(static_cast<size_t>(last - first), std::chrono::seconds(300)));
    auto all = c.outcomes();
    for (int i = first; i < last; ++i) {
      const auto& o = all["r" + std::to_string(i)];
      EXPECT_EQ(o.completions.size(), 1u) << i;
      EXPECT_EQ(o.tokens, cases()[static_cast<size_t>(i)].expected) << "request " << i;
    }
    return all;
  }
};

class RuntimeStories : public StoriesEngine, public ::testing::WithParamInterface<bool> {
 protected:
  RuntimeStories() { async_scheduling_ = GetParam(); }
};

TEST_P(RuntimeStories, AloneEqualsTheBareForwardPass) {
  auto engine = start("cpu", 256);
  for (int i = 0; i < 4; ++i) run_all(*engine, i, i + 1);
}

TEST_P(RuntimeStories, SixtyFourTogetherEqualAlone) {
  auto engine = start("cpu", 1024, /*prefix_caching=*/false);
  run_all(*engine, 0, kRequests);
}

TEST_P(RuntimeStories, PreemptionDoesNotChangeOutputs) {
  // 64 sequences of up to 100 tokens need ~400 blocks of 16; 40 force preemption.
  auto engine = start("cpu", 40, /*prefix_caching=*/false);
  run_all(*engine, 0, kRequests);
  const auto stats = testing::stats_of(sys, engine->batcher());
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST_P(RuntimeStories, TwoAndThreeWorkersEqualOne) {
  for (const std::string placement : {"cpu:0-2,cpu:2-5", "cpu:0-1,cpu:1-3,cpu:3-5"}) {
    SCOPED_TRACE(placement);
    auto engine = start(placement, 1024);
    run_all(*engine, 0, 24);
  }
}

// Two local replicas, each a whole model with its own pool: the requests spread over both and
// every output equals the bare forward pass.
TEST_P(RuntimeStories, TwoReplicasShareTheLoadWithoutChangingOutputs) {
  auto engine = start("cpu", 256, /*prefix_caching=*/true, /*replicas=*/2);
  EXPECT_EQ(engine->workers().size(), 2u);
  run_all(*engine, 0, 24);
  const auto stats = testing::stats_of(sys, engine->batcher());
  ASSERT_EQ(stats.replicas.size(), 2u);
  EXPECT_GE(stats.replicas[0].routed, 6u);
  EXPECT_GE(stats.replicas[1].routed, 6u);
  EXPECT_EQ(stats.kv_blocks_total, 2 * 256);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST_P(RuntimeStories, PrefixCacheHitsDoNotChangeOutputs) {
  auto engine = start("cpu", 1024);
  run_all(*engine, 0, 1);  // request 0 leaves the shared prefix in the cache
  auto second = run_all(*engine, 2, kRequests);
  int hits = 0;
  for (int i = 2; i < kRequests; i += 2) hits += second["r" + std::to_string(i)].completions.at(0).usage.cached_tokens > 0;
  EXPECT_EQ(hits, kRequests / 2 - 1) << "every request with the shared prefix should reuse its cached blocks";
  const auto stats = testing::stats_of(sys, engine->batcher());
  EXPECT_GT(stats.prefix_hit_tokens, 0u);
}

// The stage that samples dies mid-generation and a new worker joins for its layers: greedy,
// seeded and constrained requests go on, by recompute, to exactly what an undisturbed run
// gives. The new sampling worker hears of each sequence again with what it drew, so its
// draws resume at the same Philox step and its constraints in the same state.
TEST_P(RuntimeStories, ALostSamplingStageIsTakenOverWithoutChangingAnyOutput) {
  EngineOptions o;
  o.model = kModel;
  o.placement = "cpu:0-2,remote:2-5";
  o.backend.threads = 1;
  o.kv_blocks = 256;
  o.scheduler.max_num_seqs = 16;
  o.scheduler.max_num_batched_tokens = 64;
  auto engine = Engine::start(sys, o);
  const auto constraints = output_constraints(*engine->tokenizer(), engine->model()->config());
  auto join_worker = [&] {
    caf::scoped_actor self{sys};
    StageTerms terms;
    self->request(engine->batcher(), std::chrono::seconds(10), terms_atom::value).receive(
        [&](StageTerms& t) { terms = t; }, [](caf::error&) { FAIL() << "no terms"; });
    StageOptions knobs;
    knobs.threads = 1;
    auto backend = make_stage_backend(engine->model(), Stage{"cpu", 0, {2, 5}}, terms, knobs);
    const WorkerInfo info{"cpu 2-5", 2, 5, backend->kv_blocks()};
    auto w = spawn_worker(sys, std::move(backend), "cpu 2-5", {}, WorkerThread::own, constraints);
    self->request(engine->batcher(), std::chrono::seconds(10), join_atom::value, w, info)
        .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL() << error_message(e); });
    return w;
  };
  std::vector<SessionRequest> requests;
  for (int i = 0; i < 9; ++i) {
    SessionRequest r = request(i);
    r.limits.max_tokens = 60;
    if (i % 3 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 100 + i;
    } else if (i % 3 == 2) {
      r.sampling.temperature = 0.7f;
      r.sampling.seed = 200 + i;
      r.sampling.constraint = {OutputConstraint::Kind::regex, "( [a-z]+){8,40}\\.", false};
    }
    requests.push_back(r);
  }
  auto run = [&](bool disturbed) {
    testing::Collector c;
    for (const auto& r : requests) engine->generate(r, c.callbacks(r.id));
    if (disturbed) {
      const auto before = testing::stats_of(sys, engine->batcher()).generated_tokens;
      EXPECT_TRUE(testing::eventually([&] { return testing::stats_of(sys, engine->batcher()).generated_tokens > before + 40; }));
      caf::anon_send_exit(engine_worker_, caf::exit_reason::kill);
      EXPECT_TRUE(testing::eventually([&] { return !testing::health_of(sys, engine->batcher()).healthy; }));
      engine_worker_ = join_worker();
    }
    EXPECT_TRUE(c.wait(requests.size(), std::chrono::seconds(300)));
    return c.outcomes();
  };
  engine_worker_ = join_worker();
  ASSERT_TRUE(testing::eventually([&] { return testing::health_of(sys, engine->batcher()).healthy; }));
  const auto undisturbed = run(false);
  auto disturbed = run(true);
  for (const auto& r : requests) {
    const auto& want = undisturbed.at(r.id);
    const auto& got = disturbed.at(r.id);
    ASSERT_EQ(got.completions.size(), 1u) << r.id;
    EXPECT_EQ(got.completions[0].error, ErrorCode::none) << r.id << ": " << got.completions[0].message;
    EXPECT_EQ(got.completions[0].reason, want.completions.at(0).reason) << r.id;
    EXPECT_EQ(got.tokens, want.tokens) << r.id;
  }
  const auto stats = testing::stats_of(sys, engine->batcher());
  EXPECT_EQ(stats.recoveries, 1u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  caf::anon_send_exit(engine_worker_, caf::exit_reason::user_shutdown);
}

INSTANTIATE_TEST_SUITE_P(Scheduling, RuntimeStories, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Async" : "OneAtATime"; });

// Planning ahead changes no output: the same 64 requests (greedy ones ending on a stop string,
// seeded draws, regex-constrained draws, and some cancelled after their first token) on a pool
// small enough to preempt, after a request that leaves a shared prefix in the cache, give the
// same tokens, text and ends one step at a time and planned ahead; a cancelled one's tokens
// are a prefix of what it would have drawn.
class AsyncScheduling : public StoriesEngine {};

TEST_F(AsyncScheduling, ChangesNoOutputOfAnyKindOfRequest) {
  auto mixed = [](int i) {
    SessionRequest r = request(i);
    r.limits.max_tokens = 60;
    if (i % 4 == 0) {
      r.stop = {"."};
      r.include_stop = i % 8 == 0;
    } else if (i % 4 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 300 + i;
    } else if (i % 4 == 2) {
      r.sampling.temperature = 0.7f;
      r.sampling.seed = 400 + i;
      r.sampling.constraint = {OutputConstraint::Kind::regex, "( [a-z]+){4,30}\\.", false};
    }
    return r;
  };
  auto run = [&](bool ahead) {
    async_scheduling_ = ahead;
    auto engine = start("cpu", 40);
    testing::Collector c;
    engine->generate(mixed(0), c.callbacks("r0"));  // leaves the shared prefix in the cache
    EXPECT_TRUE(c.wait(1, std::chrono::seconds(60)));
    std::vector<session_actor> sessions(kRequests);
    for (int i = 1; i < kRequests; ++i) sessions[i] = engine->generate(mixed(i), c.callbacks("r" + std::to_string(i)));
    for (int i = 3; i < kRequests; i += 4) {
      EXPECT_TRUE(testing::eventually([&] { return !c.outcomes()["r" + std::to_string(i)].tokens.empty(); }));
      caf::anon_send(sessions[i], cancel_atom::value);
    }
    EXPECT_TRUE(c.wait(kRequests, std::chrono::seconds(300)));
    const auto stats = testing::stats_of(sys, engine->batcher());
    EXPECT_GT(stats.preemptions, 0u) << ahead;
    EXPECT_GT(stats.prefix_hit_tokens, 0u) << ahead;
    EXPECT_EQ(stats.kv_blocks_used, 0) << ahead;
    return c.outcomes();
  };
  auto one_at_a_time = run(false);
  auto ahead = run(true);
  int stopped = 0;
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = "r" + std::to_string(i);
    const auto& want = one_at_a_time.at(id);
    const auto& got = ahead.at(id);
    ASSERT_EQ(got.completions.size(), 1u) << id;
    EXPECT_EQ(got.completions[0].error, ErrorCode::none) << id << ": " << got.completions[0].message;
    if (i % 4 == 3) {
      const auto& uncut = want.tokens.size() > got.tokens.size() ? want.tokens : got.tokens;
      const auto& cut = want.tokens.size() > got.tokens.size() ? got.tokens : want.tokens;
      EXPECT_TRUE(std::equal(cut.begin(), cut.end(), uncut.begin())) << id;
      continue;
    }
    EXPECT_EQ(got.tokens, want.tokens) << id;
    EXPECT_EQ(got.text, want.text) << id;
    EXPECT_EQ(got.completions[0].reason, want.completions.at(0).reason) << id;
    stopped += i % 4 == 0 && got.completions[0].reason == FinishReason::stop;
  }
  EXPECT_GT(stopped, 8) << "most greedy requests should end on their stop string";
}

}  // namespace
}  // namespace orzo
