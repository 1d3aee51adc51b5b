// The host half of GPU sampling: plans packed for the kernel, answers unpacked as the CPU
// Sampler reports them. Pure host logic, tested without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/cuda/draw_packing.hpp"

namespace orzo::cuda {
namespace {

TEST(CudaDrawPacking, PacksEachRowsParamsWindowAndBiasBackToBack) {
  SamplingParams a, b;
  a.temperature = 0.5f;
  a.top_k = 7;
  a.top_p = 0.9f;
  a.min_p = 0.1f;
  a.repetition_penalty = 1.2f;
  a.frequency_penalty = 0.3f;
  a.presence_penalty = 0.4f;
  a.logit_bias = {{3, 1.5f}, {-1, 9.0f}, {50, 9.0f}, {49, -2.0f}};  // two outside a vocab of 50
  a.logprobs = true;
  a.top_logprobs = 4;
  b.temperature = 0;
  const std::vector<int32_t> recent_a = {1, 2, 2}, recent_b = {9};
  const std::vector<DrawPlan> plans = {{&a, 11, 3, recent_a.data(), recent_a.size()},
                                       {&b, 12, 0, recent_b.data(), recent_b.size()}};
  PackedDraws p;
  p.pack(plans, 50);
  ASSERT_EQ(p.draws.size(), 2u);
  const DeviceDraw& d = p.draws[0];
  EXPECT_EQ(d.temperature, 0.5f);
  EXPECT_EQ(d.top_k, 7);
  EXPECT_EQ(d.top_p, 0.9f);
  EXPECT_EQ(d.min_p, 0.1f);
  EXPECT_EQ(d.repetition_penalty, 1.2f);
  EXPECT_EQ(d.frequency_penalty, 0.3f);
  EXPECT_EQ(d.presence_penalty, 0.4f);
  EXPECT_EQ(d.seed, 11u);
  EXPECT_EQ(d.step, 3u);
  EXPECT_EQ(d.logprobs, 1);
  EXPECT_EQ(d.top_logprobs, 4);
  EXPECT_EQ(p.recent, (std::vector<int32_t>{1, 2, 2, 9}));
  EXPECT_EQ(d.recent_offset, 0);
  EXPECT_EQ(d.recent_count, 3);
  EXPECT_EQ(p.draws[1].recent_offset, 3);
  EXPECT_EQ(p.draws[1].recent_count, 1);
  EXPECT_EQ(p.bias_tokens, (std::vector<int32_t>{3, 49}));
  EXPECT_EQ(p.bias_values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(d.bias_count, 2);
  EXPECT_EQ(p.draws[1].bias_offset, 2);
  EXPECT_EQ(p.draws[1].bias_count, 0);
  EXPECT_EQ(p.draws[1].temperature, 0.0f);
  EXPECT_EQ(p.draws[1].logprobs, 0);

  // Packing again starts afresh.
  p.pack({plans[1]}, 50);
  EXPECT_EQ(p.draws.size(), 1u);
  EXPECT_EQ(p.recent, (std::vector<int32_t>{9}));
  EXPECT_TRUE(p.bias_tokens.empty());
}

TEST(CudaDrawPacking, ReportsLogprobsOnlyAsAskedAndNoMoreThanTheVocabulary) {
  DeviceSample s{};
  s.token = 4;
  s.logprob = -0.25f;
  for (int i = 0; i < kMaxTopLogprobs; ++i) {
    s.top_tokens[i] = 100 + i;
    s.top_logprobs[i] = -static_cast<float>(i);
  }
  SamplingParams none;
  auto r = to_sample_result(s, DrawPlan{&none}, 1000);
  EXPECT_EQ(r.token, 4);
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_TRUE(r.top_logprobs.empty());

  SamplingParams three;
  three.top_logprobs = 3;
  r = to_sample_result(s, DrawPlan{&three}, 1000);
  EXPECT_EQ(r.logprob, -0.25f);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[2].token, 102);
  EXPECT_EQ(r.top_logprobs[2].logprob, -2.0f);

  SamplingParams many;
  many.top_logprobs = 20;
  EXPECT_EQ(to_sample_result(s, DrawPlan{&many}, 5).top_logprobs.size(), 5u);
}

// A prompt token being scored draws nothing: no bias or penalty window goes to the device,
// and the answer carries the rank and prompt_logprobs alternatives, whatever the draw params say.
TEST(CudaDrawPacking, AScoredPromptTokenPacksNoDrawAndReportsItsRank) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_logprobs = 5;
  p.prompt_logprobs = 2;
  p.logit_bias = {{3, 1.0f}};
  const std::vector<int32_t> recent{1, 2};
  DrawPlan score{&p, 9, 0, nullptr, 0, 17};
  PackedDraws packed;
  packed.pack({DrawPlan{&p, 9, 4, recent.data(), recent.size()}, score}, 50);
  ASSERT_EQ(packed.draws.size(), 2u);
  const DeviceDraw& d = packed.draws[1];
  EXPECT_EQ(d.score_token, 17);
  EXPECT_EQ(d.logprobs, 1);
  EXPECT_EQ(d.top_logprobs, 2);
  EXPECT_EQ(d.recent_count, 0);
  EXPECT_EQ(d.bias_count, 0);
  EXPECT_EQ(packed.draws[0].score_token, -1);
  EXPECT_EQ(packed.draws[0].top_logprobs, 5);

  DeviceSample s{};
  s.token = 17;
  s.logprob = -3.5f;
  s.rank = 4;
  for (int i = 0; i < kMaxTopLogprobs; ++i) s.top_tokens[i] = i, s.top_logprobs[i] = -static_cast<float>(i);
  const SampleResult r = to_sample_result(s, score, 50);
  EXPECT_EQ(r.token, 17);
  EXPECT_EQ(r.logprob, -3.5f);
  EXPECT_EQ(r.rank, 4);
  EXPECT_EQ(r.top_logprobs.size(), 2u);
  p.prompt_logprobs = 0;
  EXPECT_TRUE(to_sample_result(s, score, 50).top_logprobs.empty());
}

}  // namespace
}  // namespace orzo::cuda
