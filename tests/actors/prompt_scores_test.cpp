// Prompt scoring (sampling.prompt_logprobs) through the actors on a real model (stories260K):
// every prompt position after the first is scored exactly once, in order and before any
// generated token, with the logprob, rank and alternatives the bare forward pass gives for
// the prompt alone; whether it is batched with other requests, chunked, preempted, split over
// workers, or next to prefix-cache hits, and without changing what anything draws.

#include "tests/support/actor_harness.hpp"
#include "tests/support/model_harness.hpp"

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

namespace orzo {
namespace {

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int kTop = 3;

struct Expected {
  double logprob;
  int32_t rank;
  std::vector<int32_t> top;
};

// What scoring `prompt` must give, from the bare forward pass of the prompt alone (no
// actors, one sequence), in double precision.
std::vector<Expected> reference(const std::vector<int32_t>& prompt) {
  static auto model = Model::load(kModel);
  const int64_t vocab = model->config().vocab_size;
  CpuBackend::Options o;
  o.kv_blocks = 16;
  o.threads = 1;
  CpuBackend backend(model, o);
  testing::Pipeline pipeline({&backend}, 16);
  const std::vector<float> logits = pipeline.prefill_all(0, prompt);
  std::vector<Expected> out;
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    const float* row = logits.data() + p * static_cast<size_t>(vocab);
    const double max = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double{row[i]} - max);
    const float z = row[prompt[p + 1]];
    Expected e{double{z} - max - std::log(sum), 1, {}};
    for (int64_t i = 0; i < vocab; ++i) e.rank += row[i] > z;
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int32_t i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + kTop, ids.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    e.top.assign(ids.begin(), ids.begin() + kTop);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, size_t length) {
  std::vector<int32_t> p(length);
  for (auto& t : p) t = static_cast<int32_t>(3 + rng() % 509);
  return p;
}

SessionRequest scoring(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) {
  SessionRequest r;
  r.id = id;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.prompt_logprobs = kTop;
  r.limits.max_tokens = max_tokens;
  r.limits.ignore_eos = true;
  return r;
}

void expect_scores(const testing::Outcome& o, const std::vector<int32_t>& prompt) {
  ASSERT_EQ(o.completions.size(), 1u);
  EXPECT_EQ(o.scores_after_tokens, 0);
  const auto expected = reference(prompt);
  ASSERT_EQ(o.prompt_scores.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const PromptTokenScore& s = o.prompt_scores[i];
    SCOPED_TRACE(::testing::Message() << "position " << i + 1);
    EXPECT_EQ(s.position, static_cast<int32_t>(i + 1));
    EXPECT_EQ(s.token, prompt[i + 1]);
    EXPECT_NEAR(s.logprob.v, expected[i].logprob, 1e-4);
    EXPECT_EQ(s.rank, expected[i].rank);
    std::vector<int32_t> top;
    for (const auto& t : s.top_logprobs) top.push_back(t.token);
    EXPECT_EQ(top, expected[i].top);
  }
}

class PromptScores : public ::testing::Test {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};

  std::unique_ptr<Engine> start(const std::string& placement, int32_t kv_blocks, int32_t step_tokens) {
    EngineOptions o;
    o.model = kModel;
    o.placement = placement;
    o.backend.threads = 1;
    o.kv_blocks = kv_blocks;
    o.scheduler.max_num_seqs = 32;
    o.scheduler.max_num_batched_tokens = step_tokens;
    return Engine::start(sys, o);
  }
};

// Twelve scoring requests of 1 to 150 tokens (chunked over several 48-row steps), some that
// generate after scoring and some (max_tokens 0) that only score, among twelve that do not score.
TEST_F(PromptScores, EqualTheBareForwardPassAmongOtherRequests) {
  auto engine = start("cpu", 256, 48);
  std::mt19937 rng(7);
  testing::Collector c;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back(random_prompt(rng, i == 0 ? 1 : 2 + rng() % 149));
    engine->generate(scoring("s" + std::to_string(i), prompts.back(), i % 3 == 0 ? 0 : 4), c.callbacks("s" + std::to_string(i)));
    SessionRequest plain = scoring("p" + std::to_string(i), random_prompt(rng, 5 + rng() % 40), 6);
    plain.sampling.prompt_logprobs = -1;
    engine->generate(std::move(plain), c.callbacks("p" + std::to_string(i)));
  }
  ASSERT_TRUE(c.wait(24, std::chrono::seconds(120)));
  auto all = c.outcomes();
  for (int i = 0; i < 12; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i << ", " << prompts[i].size() << " tokens");
    const auto& o = all["s" + std::to_string(i)];
    expect_scores(o, prompts[static_cast<size_t>(i)]);
    const Completion& done = o.completions.at(0);
    EXPECT_EQ(done.reason, FinishReason::length);
    EXPECT_EQ(done.usage.generated_tokens, i % 3 == 0 ? 0 : 4);
    EXPECT_EQ(o.tokens.size(), static_cast<size_t>(done.usage.generated_tokens));
    EXPECT_TRUE(all["p" + std::to_string(i)].prompt_scores.empty());
  }
  EXPECT_EQ(testing::stats_of(sys, engine->batcher()).kv_blocks_used, 0);
}

// Scoring takes no step of the request's random stream: the same seed draws the same tokens.
TEST_F(PromptScores, DoNotChangeWhatIsDrawn) {
  auto engine = start("cpu", 256, 32);
  std::mt19937 rng(11);
  const auto prompt = random_prompt(rng, 70);
  testing::Collector c;
  for (int scored = 0; scored < 2; ++scored) {
    SessionRequest r = scoring("r" + std::to_string(scored), prompt, 20);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 1234;
    if (!scored) r.sampling.prompt_logprobs = -1;
    engine->generate(std::move(r), c.callbacks("r" + std::to_string(scored)));
  }
  ASSERT_TRUE(c.wait(2));
  auto all = c.outcomes();
  EXPECT_EQ(all["r0"].tokens, all["r1"].tokens);
  EXPECT_EQ(all["r1"].prompt_scores.size(), prompt.size() - 1);
}

// A pool too small for everyone preempts sequences mid-prompt; the model split over two
// workers scores on the last one. Each position is still scored once.
TEST_F(PromptScores, SurvivePreemptionAndASplitModel) {
  auto engine = start("cpu:0-2,cpu:2-5", 24, 64);
  std::mt19937 rng(5);
  testing::Collector c;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(random_prompt(rng, 40 + rng() % 80));
    engine->generate(scoring("s" + std::to_string(i), prompts.back(), 30), c.callbacks("s" + std::to_string(i)));
  }
  ASSERT_TRUE(c.wait(16, std::chrono::seconds(180)));
  auto all = c.outcomes();
  for (int i = 0; i < 16; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    expect_scores(all["s" + std::to_string(i)], prompts[static_cast<size_t>(i)]);
  }
  EXPECT_GT(testing::stats_of(sys, engine->batcher()).preemptions, 0u);
}

// The prefix cache serves a prompt that does not score, never one that does.
TEST_F(PromptScores, TheCacheServesOnlyRequestsThatDoNotScore) {
  auto engine = start("cpu", 256, 256);
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 100);
  for (const bool score : {false, true, false}) {
    testing::Collector c;
    SessionRequest r = scoring("r", prompt, 2);
    if (!score) r.sampling.prompt_logprobs = -1;
    engine->generate(std::move(r), c.callbacks("r"));
    ASSERT_TRUE(c.wait(1));
    const auto o = c.outcomes()["r"];
    SCOPED_TRACE(score ? "scoring" : "not scoring");
    if (score) {
      EXPECT_EQ(o.completions.at(0).usage.cached_tokens, 0);
      expect_scores(o, prompt);
    } else {
      EXPECT_TRUE(o.prompt_scores.empty());
    }
  }
  EXPECT_GT(testing::stats_of(sys, engine->batcher()).prefix_hit_tokens, 0u);
}

// Against transformers: the committed float32 logits of every prompt position (tests/fixtures,
// tools/make_fixtures.py) on a random-weight Llama fixture and on stories260K.
TEST_F(PromptScores, MatchTransformersOnTheFixtures) {
  const std::string fixtures = ORZO_FIXTURES_DIR;
  for (const auto& [dir, model] : std::vector<std::pair<std::string, std::string>>{
           {fixtures + "/llama", fixtures + "/llama/model-f32.gguf"}, {fixtures + "/stories260K", kModel}}) {
    SCOPED_TRACE(dir);
    std::ifstream in(dir + "/expected.json");
    const auto expected = nlohmann::json::parse(in);
    const std::vector<float> logits = testing::read_f32_file(dir + "/" + expected["logits_file"].get<std::string>());
    const auto vocab = expected["vocab_size"].get<size_t>();
    EngineOptions o;
    o.model = model;
    o.backend.threads = 1;
    o.kv_blocks = 64;
    o.load_tokenizer = false;  // the fixture has none; scores are token ids
    auto engine = Engine::start(sys, o);
    testing::Collector c;
    const auto prompts = expected["prompts"].get<std::vector<std::vector<int32_t>>>();
    for (size_t i = 0; i < prompts.size(); ++i)
      engine->generate(scoring("r" + std::to_string(i), prompts[i], 0), c.callbacks("r" + std::to_string(i)));
    ASSERT_TRUE(c.wait(prompts.size()));
    auto all = c.outcomes();
    size_t row = 0;  // the prompts' logits lie back to back
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto& scores = all["r" + std::to_string(i)].prompt_scores;
      ASSERT_EQ(scores.size(), prompts[i].size() - 1);
      for (size_t p = 0; p + 1 < prompts[i].size(); ++p) {
        const float* z = logits.data() + (row + p) * vocab;
        const double max = *std::max_element(z, z + vocab);
        double sum = 0;
        for (size_t t = 0; t < vocab; ++t) sum += std::exp(double{z[t]} - max);
        EXPECT_NEAR(scores[p].logprob.v, double{z[prompts[i][p + 1]]} - max - std::log(sum), 1e-4)
            << "prompt " << i << " position " << p + 1;
      }
      row += prompts[i].size();
    }
    engine->shutdown();
  }
}

}  // namespace
}  // namespace orzo
