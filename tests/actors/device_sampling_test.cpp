// The worker's path for a backend that samples on its own device (a GPU's): the batcher's
// sequences reach it as DrawPlans (seed, step, penalty window) instead of logits. A stand-in
// backend draws each plan with a fresh CPU Sampler on stories260K, so the whole runtime's
// seeded output must equal the plain path's, token for token, with no GPU anywhere.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/actor_harness.hpp"

namespace orzo {
namespace {

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int32_t kBlocks = 128;

class PlannedSampling final : public LayerBackend {
 public:
  explicit PlannedSampling(std::unique_ptr<CpuBackend> inner) : inner_(std::move(inner)) {}
  LayerRange range() const override { return inner_->range(); }
  bool embeds() const override { return inner_->embeds(); }
  bool produces_logits() const override { return inner_->produces_logits(); }
  int32_t kv_blocks() const override { return inner_->kv_blocks(); }
  void forward(const ForwardBatch& b, std::vector<float>& hidden, std::vector<float>& logits) override {
    inner_->forward(b, hidden, logits);
  }
  bool samples() const override { return true; }
  void forward_and_sample(const ForwardBatch& b, std::vector<float>& hidden, const std::vector<DrawPlan>& plans,
                          std::vector<SampleResult>& out) override {
    std::vector<float> logits;
    inner_->forward(b, hidden, logits);
    const auto vocab = static_cast<int32_t>(logits.size() / std::max<size_t>(plans.size(), 1));
    out.clear();
    for (size_t i = 0; i < plans.size(); ++i) {
      SamplingParams p = *plans[i].params;
      p.seed = plans[i].seed;
      Sampler s(p);
      while (s.step() < plans[i].step) s.take_step();
      out.push_back(s.sample(logits.data() + i * static_cast<size_t>(vocab), vocab, plans[i].recent, plans[i].n_recent));
    }
    ++planned_steps;
  }
  static inline int planned_steps = 0;

 private:
  std::unique_ptr<CpuBackend> inner_;
};

std::unique_ptr<CpuBackend> stories_backend(const std::shared_ptr<const Model>& model) {
  CpuBackend::Options o;
  o.kv_blocks = kBlocks;
  o.threads = 1;
  return std::make_unique<CpuBackend>(model, o);
}

TEST(DeviceSampling, PlansDrawWhatTheWorkersOwnSamplerDraws) {
  auto model = Model::load(kStories);
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
  BatcherOptions o;
  o.kv_blocks = kBlocks;
  o.max_model_len = 256;
  o.vocab_size = static_cast<int32_t>(model->config().vocab_size);
  o.scheduler.max_num_seqs = 16;

  auto run = [&](std::unique_ptr<LayerBackend> stage) {
    std::vector<std::unique_ptr<LayerBackend>> stages;
    stages.push_back(std::move(stage));
    auto engine = Engine::start_with(sys, std::move(stages), o);
    testing::Collector c;
    for (int i = 0; i < 12; ++i) {
      SessionRequest r;
      r.id = "r" + std::to_string(i);
      r.prompt_ids = {1, 403, 407, 261, 378};
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = i % 3 == 0 ? 0 : 20;
      r.sampling.top_p = i % 2 ? 0.9f : 1.0f;
      r.sampling.repetition_penalty = i % 4 == 0 ? 1.3f : 1.0f;
      r.sampling.penalty_window = 8;
      r.sampling.seed = i;
      r.sampling.logprobs = true;
      r.limits.max_tokens = 40;
      r.limits.ignore_eos = true;
      engine->generate(r, c.callbacks(r.id));
    }
    EXPECT_TRUE(c.wait(12));
    std::vector<std::vector<int32_t>> tokens;
    for (auto& [id, outcome] : c.outcomes()) tokens.push_back(outcome.tokens);
    return tokens;
  };
  const auto want = run(stories_backend(model));
  PlannedSampling::planned_steps = 0;
  const auto got = run(std::make_unique<PlannedSampling>(stories_backend(model)));
  EXPECT_GE(PlannedSampling::planned_steps, 40);  // every step samples each sequence at most once
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(got, want);
  for (const auto& t : got) EXPECT_EQ(t.size(), 40u);
}

}  // namespace
}  // namespace orzo
