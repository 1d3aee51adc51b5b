// The last worker's sampling state: each sequence draws exactly as its own Sampler would
// over its whole history (prompt from SequenceStart, rows by position), whatever else shares
// the step and however its rows were split or recomputed.

#include "runtime/batch_sampler.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

namespace orzo {
namespace {

constexpr int32_t kVocab = 50;

SamplingParams params(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.repetition_penalty = 1.7f;
  p.presence_penalty = 0.4f;
  p.seed = seed;
  return p;
}

std::vector<float> random_logits(std::mt19937& rng, size_t rows) {
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(rows * kVocab);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(BatchSampler, DrawsAsEachSequencesOwnSamplerOverItsHistory) {
  std::mt19937 rng(5);
  BatchSampler batch;
  // Sequence 7's first 4 prompt tokens came from the prefix cache: only its tail passes as rows.
  const std::vector<int32_t> prompt7 = {3, 4, 3, 9, 11, 12}, prompt8 = {20, 21};
  batch.start(7, params(1), prompt7);
  batch.start(8, params(2), prompt8);
  Sampler own7(params(1)), own8(params(2));
  std::vector<int32_t> history7 = prompt7, history8 = prompt8;

  ForwardBatch b;
  b.block_tables = {{0}, {1}};
  b.add_chunk(0, prompt7.data() + 4, 2, 4, true);
  b.add_chunk(1, prompt8.data(), 2, 0, true);
  for (int step = 0; step < 20; ++step) {
    auto logits = random_logits(rng, b.logit_rows.size());
    auto expected = logits;
    std::vector<SampleResult> out;
    batch.sample(b, {7, 8}, logits.data(), kVocab, out);
    ASSERT_EQ(out.size(), 2u);
    const auto e7 = own7.sample(expected.data(), kVocab, history7.data(), history7.size());
    const auto e8 = own8.sample(expected.data() + kVocab, kVocab, history8.data(), history8.size());
    EXPECT_EQ(out[0].token, e7.token) << step;
    EXPECT_EQ(out[1].token, e8.token) << step;
    history7.push_back(e7.token);
    history8.push_back(e8.token);
    b = ForwardBatch{};
    b.block_tables = {{0}, {1}};
    b.add_chunk(0, &history7.back(), 1, static_cast<int32_t>(history7.size()) - 1, true);
    b.add_chunk(1, &history8.back(), 1, static_cast<int32_t>(history8.size()) - 1, true);
  }
}

// A device sampler draws with plan's (seed, step) and window: the same as sample's draws.
TEST(BatchSampler, PlansTheSameDrawsAsItSamples) {
  std::mt19937 rng(9);
  BatchSampler sampling, planning;
  auto p = params(3);
  p.penalty_window = 3;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9};
  sampling.start(4, p, prompt);
  planning.start(4, p, prompt);
  ForwardBatch b;
  b.block_tables = {{0}};
  b.add_chunk(0, prompt.data(), 5, 0, true);
  std::vector<int32_t> history = prompt;
  for (int step = 0; step < 6; ++step) {
    auto logits = random_logits(rng, 1);
    std::vector<SampleResult> out;
    sampling.sample(b, {4}, logits.data(), kVocab, out);
    std::vector<DrawPlan> plans;
    planning.plan(b, {4}, plans);
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0].step, static_cast<uint64_t>(step));
    EXPECT_EQ(plans[0].seed, 3u);
    EXPECT_EQ(plans[0].params->penalty_window, 3);
    // The window is the last three tokens before the one to draw.
    ASSERT_EQ(plans[0].n_recent, 3u);
    EXPECT_EQ(std::vector<int32_t>(plans[0].recent, plans[0].recent + 3),
              std::vector<int32_t>(history.end() - 3, history.end()));
    history.push_back(out[0].token);
    b = ForwardBatch{};
    b.block_tables = {{0}};
    b.add_chunk(0, &history.back(), 1, static_cast<int32_t>(history.size()) - 1, true);
  }
}

TEST(BatchSampler, RefusesUnknownSequencesAndForgetsReleasedOnes) {
  BatchSampler batch;
  batch.start(1, params(1), {1});
  EXPECT_EQ(batch.size(), 1u);
  ForwardBatch b;
  b.block_tables = {{0}};
  const int32_t t = 2;
  b.add_chunk(0, &t, 1, 1, true);
  std::vector<float> logits(kVocab, 0.0f);
  std::vector<SampleResult> out;
  EXPECT_THROW(batch.sample(b, {9}, logits.data(), kVocab, out), std::invalid_argument);
  EXPECT_THROW(batch.sample(b, {1, 2}, logits.data(), kVocab, out), std::invalid_argument);
  batch.release(1);
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_THROW(batch.sample(b, {1}, logits.data(), kVocab, out), std::invalid_argument);
}

// Rows that predict a prompt token score it (the token the prompt has there, not a draw);
// the row that predicts past the prompt draws, and its draw is the one an unscored sequence
// makes: scoring takes no step. Plans say the same for a device sampler.
TEST(BatchSampler, RowsInsideThePromptScoreItsNextToken) {
  std::mt19937 rng(9);
  SamplingParams p = params(4);
  p.prompt_logprobs = 2;
  const std::vector<int32_t> prompt = {3, 4, 3, 9, 11};
  BatchSampler batch;
  batch.start(7, p, prompt);
  ForwardBatch b;
  b.block_tables = {{0}};
  b.add_chunk_with_logits(0, prompt.data() + 1, 4, 1, 4);  // rows at positions 1..4
  ASSERT_EQ(b.logit_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  auto logits = random_logits(rng, 4);
  auto expected = logits;
  std::vector<SampleResult> out;
  batch.sample(b, {7}, logits.data(), kVocab, out);
  ASSERT_EQ(out.size(), 4u);
  Sampler own(p);
  for (size_t i = 0; i < 3; ++i) {
    const SampleResult e = own.score(expected.data() + i * kVocab, kVocab, prompt[i + 2], 2);
    EXPECT_EQ(out[i].token, prompt[i + 2]) << i;
    EXPECT_EQ(out[i].logprob, e.logprob) << i;
    EXPECT_EQ(out[i].rank, e.rank) << i;
    EXPECT_EQ(out[i].top_logprobs.size(), 2u) << i;
  }
  EXPECT_EQ(own.step(), 0u);
  const SampleResult drawn = own.sample(expected.data() + 3 * kVocab, kVocab, prompt.data(), prompt.size());
  EXPECT_EQ(out[3].token, drawn.token);
  EXPECT_EQ(out[3].rank, 0);

  BatchSampler planner;
  planner.start(7, p, prompt);
  std::vector<DrawPlan> plans;
  planner.plan(b, {7}, plans);
  ASSERT_EQ(plans.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(plans[i].score_token, prompt[i + 2]) << i;
  EXPECT_EQ(plans[3].score_token, -1);
  EXPECT_EQ(plans[3].step, 0u);
}

// A constrained sequence draws only what its constraint allows, step after step, and ends
// where it may (EOS); the device path's plans carry the same masks and commit() moves the
// constraint on. A constraint that leaves nothing, or that no stage could compile, answers
// kNoToken; an unconstrained neighbour is untouched.
std::shared_ptr<grammar::ConstraintCache> digits_vocabulary() {
  std::vector<std::string> bytes;
  for (int i = 0; i < kVocab - 1; ++i) bytes.push_back(i < 10 ? std::string(1, static_cast<char>('0' + i)) : "x" + std::to_string(i));
  bytes.push_back("</s>");
  std::vector<uint8_t> special(bytes.size(), 0);
  special.back() = 1;
  return std::make_shared<grammar::ConstraintCache>(
      std::make_shared<grammar::Vocabulary>(bytes, special, std::vector<int32_t>{kVocab - 1}, kVocab));
}

TEST(BatchSampler, ConstrainedDrawsStayInsideTheirConstraint) {
  std::mt19937 rng(21);
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "plans" : "CPU");
    BatchSampler batch(digits_vocabulary());
    SamplingParams constrained = params(3);
    constrained.constraint = {OutputConstraint::Kind::regex, "[0-3]{2,4}", false};
    batch.start(1, constrained, {12, 13});
    batch.start(2, params(4), {12});
    std::string out;
    std::vector<int32_t> plain;
    for (int step = 0; step < 8; ++step) {
      ForwardBatch b;
      b.block_tables = {{0}, {1}};
      const int32_t t1 = out.empty() ? 13 : static_cast<int32_t>(out.back() - '0');
      b.add_chunk(0, &t1, 1, 1 + static_cast<int32_t>(out.size()), true);
      const int32_t t2 = 12;
      b.add_chunk(1, &t2, 1, step, true);
      auto logits = random_logits(rng, 2);
      std::vector<SampleResult> r;
      if (device) {
        std::vector<DrawPlan> plans;
        batch.plan(b, {1, 2}, plans);
        ASSERT_NE(plans[0].allowed, nullptr);
        EXPECT_EQ(plans[1].allowed, nullptr);
        // Stand in for the GPU: the CPU sampler over the same masks.
        for (size_t i = 0; i < plans.size(); ++i) {
          Sampler s(*plans[i].params);
          s.resume_at(plans[i].step);
          TokenMask m;
          if (plans[i].allowed) m.words.assign(plans[i].allowed, plans[i].allowed + 1);
          r.push_back(s.sample(logits.data() + i * kVocab, kVocab, nullptr, 0, plans[i].allowed ? &m : nullptr));
        }
        batch.commit(r);
      } else {
        batch.sample(b, {1, 2}, logits.data(), kVocab, r);
      }
      ASSERT_EQ(r.size(), 2u);
      if (r[0].token == kVocab - 1) break;  // EOS: allowed only once the output may end
      ASSERT_GE(r[0].token, 0);
      ASSERT_LE(r[0].token, 3) << step;
      out += static_cast<char>('0' + r[0].token);
      ASSERT_LE(out.size(), 4u);
      plain.push_back(r[1].token);
    }
    EXPECT_GE(out.size(), 2u);
  }
}

TEST(BatchSampler, AConstraintThatLeavesNothingAnswersNoToken) {
  for (const bool device : {false, true}) {
    BatchSampler batch(digits_vocabulary());
    SamplingParams p = params(3);
    p.constraint = {OutputConstraint::Kind::regex, "é", false};  // no token spells it
    batch.start(1, p, {12});
    BatchSampler no_vocab;  // a stage without a tokenizer
    no_vocab.start(1, p, {12});
    for (BatchSampler* s : {&batch, &no_vocab}) {
      ForwardBatch b;
      b.block_tables = {{0}};
      const int32_t t = 12;
      b.add_chunk(0, &t, 1, 0, true);
      std::vector<float> logits(kVocab, 0.0f);
      std::vector<SampleResult> r;
      if (device) {
        std::vector<DrawPlan> plans;
        s->plan(b, {1}, plans);
        r.push_back(SampleResult{5, 0.0f, {}, 0});
        s->commit(r);
      } else {
        s->sample(b, {1}, logits.data(), kVocab, r);
      }
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].token, BatchSampler::kNoToken);
    }
  }
}

// A sampling worker that takes over a sequence (its stage was lost) hears of it with what it
// drew: the rows it recomputes draw what the first worker would have drawn next, under the
// same constraint state, penalties and Philox step.
TEST(BatchSampler, AStartWithWhatWasDrawnResumesTheDraws) {
  std::mt19937 rng(33);
  SamplingParams p = params(8);
  p.constraint = {OutputConstraint::Kind::regex, "[0-3]{3,12}", false};
  const std::vector<int32_t> prompt = {12, 13};
  BatchSampler first(digits_vocabulary());
  first.start(1, p, prompt);
  std::vector<int32_t> history = prompt;
  auto step = [&](BatchSampler& sampler, const ForwardBatch& b, std::vector<float> logits) {
    std::vector<SampleResult> r;
    sampler.sample(b, {1}, logits.data(), kVocab, r);
    return r.at(0).token;
  };
  for (int i = 0; i < 5; ++i) {
    ForwardBatch b;
    b.block_tables = {{0}};
    if (i == 0)
      b.add_chunk(0, prompt.data(), 2, 0, true);
    else
      b.add_chunk(0, &history.back(), 1, static_cast<int32_t>(history.size()) - 1, true);
    const int32_t token = step(first, b, random_logits(rng, 1));
    ASSERT_GE(token, 0);
    ASSERT_LE(token, 3);
    history.push_back(token);
  }
  BatchSampler second(digits_vocabulary());
  second.start(1, p, prompt, std::vector<int32_t>(history.begin() + 2, history.end()));
  // The first worker decodes one row; the second recomputes the whole sequence in one chunk.
  for (int i = 0; i < 4; ++i) {
    ForwardBatch decode, recompute;
    decode.block_tables = recompute.block_tables = {{0}};
    decode.add_chunk(0, &history.back(), 1, static_cast<int32_t>(history.size()) - 1, true);
    recompute.add_chunk(0, history.data(), static_cast<int32_t>(history.size()), 0, true);
    const auto logits = random_logits(rng, 1);
    const int32_t a = step(first, decode, logits), b = step(second, i == 0 ? recompute : decode, logits);
    EXPECT_EQ(a, b) << i;
    history.push_back(a);
  }
}

// Planned ahead, a step's row may carry kPendingToken: the token this sampler drew for that
// position in the step before, on the CPU (sample) or on a device (plan, then commit). Where
// there was no such draw (a refused one, or a failed step) the row gets token 0, which the
// batcher discards with its sequence.
TEST(BatchSampler, FillsPendingRowsWithItsOwnDraws) {
  std::mt19937 rng(11);
  BatchSampler batch;
  const std::vector<int32_t> prompt = {3, 4, 5};
  batch.start(7, params(1), prompt);
  ForwardBatch b;
  b.block_tables = {{0}};
  b.add_chunk(0, prompt.data(), 3, 0, true);
  auto logits = random_logits(rng, 1);
  std::vector<SampleResult> out;
  batch.sample(b, {7}, logits.data(), kVocab, out);
  ASSERT_EQ(out.size(), 1u);
  auto pending_at = [](int32_t pos) {
    ForwardBatch next;
    next.block_tables = {{0}};
    const int32_t token = kPendingToken;
    next.add_chunk(0, &token, 1, pos, true);
    return next;
  };
  auto next = pending_at(3);
  batch.fill_pending(next, {7});
  EXPECT_EQ(next.tokens[0], out[0].token);
  auto elsewhere = pending_at(4);
  batch.fill_pending(elsewhere, {7});
  EXPECT_EQ(elsewhere.tokens[0], 0);
  std::vector<DrawPlan> plans;
  batch.plan(next, {7}, plans);
  std::vector<SampleResult> drawn = {SampleResult{42, 0.0f, {}, 0}};
  batch.commit(drawn);
  auto after = pending_at(4);
  batch.fill_pending(after, {7});
  EXPECT_EQ(after.tokens[0], 42);
  auto unknown = pending_at(4);
  batch.fill_pending(unknown, {8});
  EXPECT_EQ(unknown.tokens[0], 0);
}

}  // namespace
}  // namespace orzo
