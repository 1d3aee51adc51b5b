// Every protocol message survives serialization bit for bit, the floats CAF 0.17 would
// mangle (NaN, ±inf, denormals, -0) included.

#include "tests/support/actor_harness.hpp"

#include "protocol/interfaces.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace orzo {
namespace {

template <class T>
T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  EXPECT_FALSE(sink(x));
  T y;
  caf::binary_deserializer source{sys, buf};
  EXPECT_FALSE(source(y));
  return y;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

const float kAwkward[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::infinity(), 1e-40f, -0.0f, 0.25f};

class Protocol : public ::testing::Test {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
};

TEST_F(Protocol, GenerationRequestKeepsEveryField) {
  GenerationRequest r;
  r.id = "req-1";
  r.prompt = {1, 2, 3};
  r.sampling.temperature = kAwkward[3];
  r.sampling.top_k = 7;
  r.sampling.top_p = kAwkward[4];
  r.sampling.min_p = 0.1f;
  r.sampling.repetition_penalty = 1.3f;
  r.sampling.frequency_penalty = -0.5f;
  r.sampling.presence_penalty = 0.25f;
  r.sampling.penalty_window = 9;
  r.sampling.logit_bias = {{5, -std::numeric_limits<float>::infinity()}, {6, 2.5f}};
  r.sampling.seed = 42;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;
  r.sampling.prompt_logprobs = 2;
  r.limits = GenerationLimits{10, 2, {7, 8}, true};
  r.priority = -4;
  const auto y = round_trip(sys, r);
  EXPECT_EQ(y.id, r.id);
  EXPECT_EQ(y.prompt, r.prompt);
  EXPECT_EQ(bits(y.sampling.temperature), bits(r.sampling.temperature));
  EXPECT_EQ(bits(y.sampling.top_p), bits(r.sampling.top_p));
  EXPECT_EQ(y.sampling.top_k, 7);
  EXPECT_EQ(y.sampling.min_p, 0.1f);
  EXPECT_EQ(y.sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(y.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(y.sampling.presence_penalty, 0.25f);
  EXPECT_EQ(y.sampling.penalty_window, 9);
  EXPECT_EQ(y.sampling.logit_bias, r.sampling.logit_bias);
  EXPECT_EQ(y.sampling.seed, std::optional<uint64_t>{42});
  EXPECT_TRUE(y.sampling.logprobs);
  EXPECT_EQ(y.sampling.top_logprobs, 3);
  EXPECT_EQ(y.sampling.prompt_logprobs, 2);
  EXPECT_EQ(y.limits.max_tokens, 10);
  EXPECT_EQ(y.limits.min_tokens, 2);
  EXPECT_EQ(y.limits.stop_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(y.limits.ignore_eos);
  EXPECT_EQ(y.priority, -4);
  r.sampling.seed.reset();
  EXPECT_FALSE(round_trip(sys, r).sampling.seed.has_value());
}

TEST_F(Protocol, LogprobsKeepTheirBits) {
  for (float f : kAwkward) {
    TokenEvent ev{"r", 5, 2, f32{f}, {TopLogprob{9, f32{f}}}};
    const auto y = round_trip(sys, ev);
    EXPECT_EQ(bits(y.logprob.v), bits(f));
    ASSERT_EQ(y.top_logprobs.size(), 1u);
    EXPECT_EQ(bits(y.top_logprobs[0].logprob.v), bits(f));
    EXPECT_EQ(y.token, 5);
    EXPECT_EQ(y.index, 2);
  }
}

TEST_F(Protocol, StepRequestCarriesHiddenStatesExactly) {
  StepRequest s;
  s.step = 77;
  s.batch.add_chunk(0, std::vector<int32_t>{4, 5, 6}.data(), 3, 10, true);
  s.batch.block_tables = {{3, 9}, {kNoBlock, 11}};
  s.batch.kv_groups = 2;
  s.seq_ids = {12};
  s.started.push_back(SequenceStart{12, SamplingParams{}, {1, 2}, {7}});
  s.released = {3, 4};
  s.hidden.assign(std::begin(kAwkward), std::end(kAwkward));
  const auto y = round_trip(sys, s);
  EXPECT_EQ(y.step, 77u);
  EXPECT_EQ(y.batch.tokens, s.batch.tokens);
  EXPECT_EQ(y.batch.positions, s.batch.positions);
  EXPECT_EQ(y.batch.seq_index, s.batch.seq_index);
  EXPECT_EQ(y.batch.block_tables, s.batch.block_tables);
  EXPECT_EQ(y.batch.kv_groups, 2);
  EXPECT_EQ(y.batch.logit_rows, s.batch.logit_rows);
  EXPECT_EQ(y.seq_ids, s.seq_ids);
  ASSERT_EQ(y.started.size(), 1u);
  EXPECT_EQ(y.started[0].prompt, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(y.started[0].generated, (std::vector<int32_t>{7}));
  EXPECT_EQ(y.released, s.released);
  ASSERT_EQ(y.hidden.size(), s.hidden.size());
  for (size_t i = 0; i < s.hidden.size(); ++i) EXPECT_EQ(bits(y.hidden[i]), bits(s.hidden[i])) << i;
}

TEST_F(Protocol, EndsAndChunksKeepEveryField) {
  FinishedEvent f{"r", FinishReason::length, ErrorCode::overloaded, "why", Usage{5, 3, 2, 1234}};
  const auto g = round_trip(sys, f);
  EXPECT_EQ(g.request_id, "r");
  EXPECT_EQ(g.reason, FinishReason::length);
  EXPECT_EQ(g.error, ErrorCode::overloaded);
  EXPECT_EQ(g.message, "why");
  EXPECT_EQ(g.usage.cached_tokens, 3);
  TextChunk t{"r", "héllo", {1, 2}, {f32{-1.5f}, f32{kAwkward[1]}}, {{TopLogprob{3, f32{-0.5f}}}, {}},
              {PromptTokenScore{1, 9, f32{kAwkward[2]}, 4, {TopLogprob{5, f32{-0.25f}}}}}};
  const auto u = round_trip(sys, t);
  EXPECT_EQ(u.text, "héllo");
  EXPECT_EQ(u.tokens, t.tokens);
  EXPECT_EQ(bits(u.logprobs[1].v), bits(kAwkward[1]));
  EXPECT_EQ(u.top_logprobs[0][0].token, 3);
  ASSERT_EQ(u.prompt_scores.size(), 1u);
  EXPECT_EQ(u.prompt_scores[0].position, 1);
  EXPECT_EQ(u.prompt_scores[0].token, 9);
  EXPECT_EQ(bits(u.prompt_scores[0].logprob.v), bits(kAwkward[2]));
  EXPECT_EQ(u.prompt_scores[0].rank, 4);
  EXPECT_EQ(u.prompt_scores[0].top_logprobs.at(0).token, 5);
  const auto scores = round_trip(sys, PromptScoresEvent{"r", t.prompt_scores});
  EXPECT_EQ(scores.request_id, "r");
  EXPECT_EQ(scores.scores.at(0).rank, 4);
  StepResult r{4, {SampledToken{8, f32{kAwkward[0]}, {}, 7}}};
  const auto back = round_trip(sys, r).samples.at(0);
  EXPECT_EQ(bits(back.logprob.v), bits(kAwkward[0]));
  EXPECT_EQ(back.rank, 7);
}

TEST_F(Protocol, JoinTermsAndWorkerInfoKeepEveryField) {
  const auto t = round_trip(sys, StageTerms{96, 16, 2048, 64, 4096, {0, 512}});
  EXPECT_EQ(t.kv_blocks, 96);
  EXPECT_EQ(t.block_size, 16);
  EXPECT_EQ(t.max_rows, 2048);
  EXPECT_EQ(t.max_seqs, 64);
  EXPECT_EQ(t.max_model_len, 4096);
  EXPECT_EQ(t.kv_windows, (std::vector<int32_t>{0, 512}));
  const auto w = round_trip(sys, WorkerInfo{"cpu:0 layers 2-5 (pid 7)", 2, 5, 96, {0, 512, 512}});
  EXPECT_EQ(w.device, "cpu:0 layers 2-5 (pid 7)");
  EXPECT_EQ(w.first_layer, 2);
  EXPECT_EQ(w.end_layer, 5);
  EXPECT_EQ(w.kv_blocks, 96);
  EXPECT_EQ(w.kv_windows, (std::vector<int32_t>{0, 512, 512}));
}

}  // namespace
}  // namespace orzo
