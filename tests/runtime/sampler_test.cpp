#include "runtime/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <numeric>
#include <random>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/philox.hpp"

namespace orzo {
namespace {

constexpr int kDraws = 20000;
// Chi-square critical values at p = 0.001, indexed by degrees of freedom.
constexpr double kChiSquare001[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};

SamplingParams seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

int32_t vocab_of(const std::vector<float>& logits) { return static_cast<int32_t>(logits.size()); }

// Samples a fresh copy of `logits` each time, as the row is scratch to the sampler.
std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> row;
  for (int i = 0; i < draws; ++i) {
    row = logits;
    ++counts[static_cast<size_t>(sampler.sample(row.data(), vocab_of(logits), nullptr, 0).token)];
  }
  return counts;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  for (float z : logits) p.push_back(std::exp((z - max) / temperature));
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= sum;
  return p;
}

// Keeps the probabilities of `keep` tokens, renormalized; zero elsewhere.
std::vector<double> restrict_to(const std::vector<double>& p, const std::vector<int>& keep) {
  std::vector<double> out(p.size(), 0.0);
  double sum = 0;
  for (int t : keep) sum += p[static_cast<size_t>(t)];
  for (int t : keep) out[static_cast<size_t>(t)] = p[static_cast<size_t>(t)] / sum;
  return out;
}

// Checks that tokens of probability zero never appear and that the rest fit `p`.
void expect_fits(const std::vector<int>& counts, const std::vector<double>& p) {
  double chi2 = 0;
  int categories = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " should never be drawn";
      continue;
    }
    const double expected = p[t] * kDraws;
    ASSERT_GE(expected, 5) << "too few expected draws for a chi-square test";
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
    ++categories;
  }
  ASSERT_GE(categories, 2);
  EXPECT_LT(chi2, kChiSquare001[categories - 1]);
}

std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

const std::vector<float> kEight = {1.0f, 0.2f, 2.1f, -0.5f, 1.7f, 0.0f, -1.0f, 0.9f};

TEST(Sampler, GreedyPicksTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  Sampler sampler(p);
  std::vector<float> row = kEight;
  EXPECT_EQ(sampler.sample(row.data(), vocab_of(row), nullptr, 0).token, 2);
}

TEST(Sampler, GreedyBreaksTiesByLowestId) {
  SamplingParams p;
  p.temperature = 0;
  Sampler sampler(p);
  std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 3.0f};
  EXPECT_EQ(sampler.sample(row.data(), vocab_of(row), nullptr, 0).token, 1);
}

TEST(Sampler, TopKOfOneIsGreedyAtAnyTemperature) {
  SamplingParams p = seeded(3);
  p.temperature = 5;
  p.top_k = 1;
  Sampler sampler(p);
  std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f};
  for (int i = 0; i < 100; ++i) {
    row = {0.5f, 3.0f, -1.0f, 3.0f};
    ASSERT_EQ(sampler.sample(row.data(), vocab_of(row), nullptr, 0).token, 1);
  }
}

std::vector<int32_t> sequence(uint64_t seed, int steps) {
  Sampler sampler(seeded(seed));
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.05f * static_cast<float>(i % 13);
  std::vector<int32_t> tokens;
  std::vector<float> row;
  for (int i = 0; i < steps; ++i) {
    row = logits;
    tokens.push_back(sampler.sample(row.data(), vocab_of(row), nullptr, 0).token);
  }
  return tokens;
}

TEST(Sampler, SameSeedGivesTheSameTokens) {
  EXPECT_EQ(sequence(1234, 50), sequence(1234, 50));
  EXPECT_NE(sequence(1234, 50), sequence(1235, 50));
}

TEST(Sampler, EveryCallAdvancesTheStep) {
  SamplingParams p = seeded(9);
  Sampler sampler(p);
  std::vector<float> row = kEight;
  EXPECT_EQ(sampler.step(), 0u);
  sampler.sample(row.data(), vocab_of(row), nullptr, 0);
  EXPECT_EQ(sampler.step(), 1u);
  EXPECT_EQ(sampler.seed(), 9u);
}

TEST(Sampler, UnseededSamplersDrawTheirOwnSeeds) {
  EXPECT_NE(Sampler(SamplingParams{}).seed(), Sampler(SamplingParams{}).seed());
}

TEST(Sampler, FrequenciesMatchTheTemperedSoftmax) {
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    SCOPED_TRACE(temperature);
    SamplingParams p = seeded(20240601);
    p.temperature = temperature;
    Sampler sampler(p);
    expect_fits(histogram(sampler, kEight, kDraws), softmax(kEight, temperature));
  }
}

// The same eight logits among 4000 masked tokens: a vocabulary this large takes the bucket
// path rather than the heap.
TEST(Sampler, FrequenciesMatchTheTemperedSoftmaxInALargeVocabulary) {
  std::vector<float> logits(4000, -INFINITY);
  std::copy(kEight.begin(), kEight.end(), logits.begin() + 1000);
  for (float temperature : {0.5f, 2.0f}) {
    SCOPED_TRACE(temperature);
    SamplingParams p = seeded(20240602);
    p.temperature = temperature;
    p.top_p = 0.999f;
    Sampler sampler(p);
    const auto counts = histogram(sampler, logits, kDraws);
    EXPECT_EQ(std::accumulate(counts.begin() + 1000, counts.begin() + 1008, 0), kDraws);
    expect_fits(std::vector<int>(counts.begin() + 1000, counts.begin() + 1008),
                softmax(kEight, temperature));
  }
}

TEST(Sampler, TopKKeepsTheKMostLikelyRenormalized) {
  SamplingParams p = seeded(77);
  p.top_k = 3;
  p.temperature = 1.5f;
  Sampler sampler(p);
  // Tokens 2, 4 and 0 are the three most likely.
  expect_fits(histogram(sampler, kEight, kDraws), restrict_to(softmax(kEight, 1.5), {2, 4, 0}));
}

TEST(Sampler, TopKBreaksTiesAtTheBoundaryByLowestId) {
  SamplingParams p = seeded(5);
  p.top_k = 2;
  Sampler sampler(p);
  const std::vector<float> logits = {1.0f, 2.0f, 1.0f, 1.0f};
  expect_fits(histogram(sampler, logits, kDraws), restrict_to(softmax(logits, 1.0), {1, 0}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<double> probs = {0.05, 0.4, 0.1, 0.3, 0.15};
  SamplingParams p = seeded(88);
  // Cumulative most likely first: 0.4, 0.7, 0.85, 0.95; the boundary token 4 is kept.
  p.top_p = 0.8f;
  Sampler sampler(p);
  expect_fits(histogram(sampler, log_of(probs), kDraws), restrict_to(probs, {1, 3, 4}));
}

TEST(Sampler, TopPAlwaysKeepsTheMostLikelyToken) {
  SamplingParams p = seeded(89);
  p.top_p = 0.01f;
  Sampler sampler(p);
  const auto counts = histogram(sampler, log_of({0.3, 0.4, 0.3}), 1000);
  EXPECT_EQ(counts[1], 1000);
}

TEST(Sampler, TopPMeasuresWhatTopKLeft) {
  SamplingParams p = seeded(90);
  p.top_k = 2;
  p.top_p = 0.5f;
  Sampler sampler(p);
  // Over the full distribution 0.4 < 0.5 would keep two tokens; renormalized over top-k's
  // two tokens the first weighs 4/7 and is enough alone.
  const auto counts = histogram(sampler, log_of({0.4, 0.3, 0.2, 0.1}), 1000);
  EXPECT_EQ(counts[0], 1000);
}

TEST(Sampler, MinPKeepsTokensNearTheTop) {
  const std::vector<double> probs = {0.1, 0.5, 0.04, 0.2, 0.06, 0.07, 0.03};
  SamplingParams p = seeded(99);
  p.min_p = 0.15f;  // threshold 0.075
  Sampler sampler(p);
  expect_fits(histogram(sampler, log_of(probs), kDraws), restrict_to(probs, {0, 1, 3}));
}

TEST(Sampler, FiltersCombine) {
  const std::vector<double> probs = {0.02, 0.25, 0.2, 0.15, 0.12, 0.1, 0.08, 0.08};
  SamplingParams p = seeded(4242);
  p.top_k = 6;      // drops 0, and 7 (tied with 6, larger id)
  p.top_p = 0.75f;  // of the 0.9 left, 0.675: cumulative 0.25, 0.45, 0.6, 0.72 keeps 1, 2, 3, 4
  p.min_p = 0.5f;   // threshold 0.125: drops 4
  Sampler sampler(p);
  expect_fits(histogram(sampler, log_of(probs), kDraws), restrict_to(probs, {1, 2, 3}));
}

// The obvious implementation of the draw: sort everything, then walk. The sampler must agree
// token for token, which it only does if its partial collection never misses a token.
std::vector<int32_t> most_likely_first(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  return order;
}

int32_t reference_draw(const std::vector<float>& logits, std::vector<int32_t> order,
                       const SamplingParams& p, float u) {
  const int32_t vocab = vocab_of(logits);
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  if (top_k) order.resize(static_cast<size_t>(p.top_k));
  const float max = logits[order[0]];
  std::vector<double> w;
  for (int32_t t : order) w.push_back(sampling_weight((logits[t] - max) / p.temperature));
  double total = 0;
  if (top_k) {
    for (double x : w) total += x;
  } else {
    for (float z : logits) total += sampling_weight((z - max) / p.temperature);
  }
  size_t kept = order.size();
  if (p.top_p < 1) {
    double cumulative = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      cumulative += w[i];
      kept = i + 1;
      if (cumulative >= p.top_p * total) break;
    }
  }
  for (double& x : w) x = x >= p.min_p ? x : 0.0;
  double kept_total = 0;
  for (size_t i = 0; i < kept; ++i) kept_total += w[i];
  double cumulative = 0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += w[i];
    if (cumulative > u * kept_total) return order[i];
  }
  ADD_FAILURE() << "the reference walk never reached its target";
  return -1;
}

struct DrawCase {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};

void expect_draws_match_a_full_sort(const std::vector<float>& logits,
                                    std::initializer_list<DrawCase> cases) {
  const std::vector<int32_t> order = most_likely_first(logits);
  for (const DrawCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.temperature << " k=" << c.top_k << " p=" << c.top_p
                                    << " min_p=" << c.min_p);
    SamplingParams p = seeded(31337);
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    Sampler sampler(p);
    std::vector<float> row;
    for (uint64_t step = 0; step < 50; ++step) {
      row = logits;
      const int32_t token = sampler.sample(row.data(), vocab_of(logits), nullptr, 0).token;
      ASSERT_EQ(token, reference_draw(logits, order, p, philox_uniform(31337, step)))
          << "step " << step;
    }
  }
}

constexpr int32_t kLargeVocab = 128256;

// Mass spread over thousands of tokens: walks stop in crowded buckets.
TEST(Sampler, FlatLargeVocabularyDrawsMatchAFullSort) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> logits(kLargeVocab);
  for (float& z : logits) z = normal(rng);
  for (int32_t t = 0; t < 4; ++t) {
    logits[static_cast<size_t>(t * 1000)] = 12.0f - static_cast<float>(t);
  }
  expect_draws_match_a_full_sort(logits, {{1.0f, 0, 1.0f, 0.0f},
                                          {0.7f, 0, 0.9f, 0.0f},
                                          {1.0f, 0, 1.0f, 0.05f},
                                          {1.3f, 50, 0.95f, 0.0f},
                                          {1.5f, 0, 0.5f, 0.01f},
                                          {3.0f, 0, 1.0f, 0.0f},
                                          {2.0f, 40000, 0.99f, 0.0f},
                                          {1.0f, 2000, 1.0f, 0.02f},
                                          {0.8f, 0, 0.95f, 0.1f}});
}

// A confident model: a few tokens far above a long tail, part of it masked to -inf, part of
// it so far down that its weights underflow to 0.
TEST(Sampler, PeakedLargeVocabularyDrawsMatchAFullSort) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kLargeVocab);
  for (float& z : logits) z = normal(rng);
  for (size_t t = 0; t < logits.size(); t += 7) logits[t] = -INFINITY;
  const float top[] = {25.0f, 24.0f, 23.5f, 21.0f, 20.0f, 20.0f, 17.0f};
  for (size_t t = 0; t < std::size(top); ++t) logits[100 + 997 * t] = top[t];
  expect_draws_match_a_full_sort(logits, {{1.0f, 0, 1.0f, 0.0f},
                                          {0.7f, 2000, 1.0f, 0.0f},
                                          {0.7f, 0, 0.999f, 0.0f},
                                          {1.0f, 100000, 1.0f, 0.0f},
                                          {0.3f, 0, 1.0f, 0.0f},
                                          {2.0f, 0, 0.9f, 0.0f},
                                          {1.0f, 5, 1.0f, 0.0f},
                                          {1.0f, 0, 1.0f, 0.3f}});
}

// Modest vocabularies, coarse logits full of ties, -inf masks and random settings: every path
// (heap, buckets, greedy top-k of 1) against the full sort.
TEST(Sampler, RandomCasesMatchAFullSort) {
  std::mt19937 rng(2024);
  const auto uniform = [&](float low, float high) {
    return std::uniform_real_distribution<float>(low, high)(rng);
  };
  for (int trial = 0; trial < 300; ++trial) {
    // Up to 3000 tokens: both sides of the heap path's 1024 limit.
    const auto vocab = static_cast<int32_t>(trial % 2 == 0 ? rng() % 300 + 1 : rng() % 3000 + 1);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& z : logits) {
      const auto kind = rng() % 10;
      z = kind == 0 ? -INFINITY : kind < 5 ? static_cast<float>(rng() % 5) : uniform(-8, 8);
    }
    logits[rng() % logits.size()] = 3.0f;  // at least one finite logit
    SamplingParams p = seeded(rng());
    p.temperature = uniform(0.05f, 3.0f);
    p.top_k = rng() % 3 == 0 ? static_cast<int32_t>(rng() % (logits.size() + 5)) : 0;
    p.top_p = rng() % 2 == 0 ? uniform(0.05f, 1.0f) : 1.0f;
    p.min_p = rng() % 3 == 0 ? uniform(0.0f, 0.9f) : 0.0f;
    SCOPED_TRACE(testing::Message()
                 << "trial " << trial << " vocab " << vocab << " T=" << p.temperature
                 << " k=" << p.top_k << " p=" << p.top_p << " min_p=" << p.min_p);
    const std::vector<int32_t> order = most_likely_first(logits);
    Sampler sampler(p);
    std::vector<float> row;
    for (uint64_t step = 0; step < 20; ++step) {
      row = logits;
      const int32_t token = sampler.sample(row.data(), vocab, nullptr, 0).token;
      ASSERT_EQ(token, reference_draw(logits, order, p, philox_uniform(*p.seed, step)))
          << "step " << step;
    }
  }
}

TEST(SamplerWeight, TracksExpAcrossTheFloatRange) {
  double worst = 0;
  for (float x = -86.99f; x <= 0; x += 0.00137f) {
    const double exact = std::exp(double{x});
    worst = std::max(worst, std::abs(sampling_weight(x) - exact) / exact);
  }
  EXPECT_LT(worst, 1e-7);
  EXPECT_EQ(sampling_weight(0.0f), 1.0f);  // the most likely token weighs exactly 1
  EXPECT_EQ(sampling_weight(3.0f), 1.0f);
  EXPECT_EQ(sampling_weight(-88.0f), 0.0f);
  EXPECT_EQ(sampling_weight(-INFINITY), 0.0f);
  EXPECT_EQ(sampling_weight(std::nanf("")), 0.0f);
}

TEST(Sampler, PenaltiesChangeLogitsExactly) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  const std::vector<int32_t> recent = {0, 1, 0, 2, 0, 1};
  std::vector<int32_t> scratch;
  apply_penalties(p, logits.data(), vocab_of(logits), recent.data(), recent.size(), scratch);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 1.5f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[1], -1.0f * 1.5f - 2 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[2], 0.5f / 1.5f - 1 * 0.25f - 0.5f);
  EXPECT_EQ(logits[3], 3.0f);
  EXPECT_EQ(logits[4], -2.0f);
}

TEST(Sampler, PenaltiesOnlyCountTheWindow) {
  SamplingParams p;
  p.frequency_penalty = 1.0f;
  p.penalty_window = 3;
  std::vector<float> logits(4, 0.0f);
  const std::vector<int32_t> recent = {3, 3, 3, 0, 1, 0};
  std::vector<int32_t> scratch;
  apply_penalties(p, logits.data(), 4, recent.data(), recent.size(), scratch);
  EXPECT_EQ(logits, (std::vector<float>{-2.0f, -1.0f, 0.0f, 0.0f}));

  p.penalty_window = 0;
  std::vector<float> untouched(4, 0.0f);
  apply_penalties(p, untouched.data(), 4, recent.data(), recent.size(), scratch);
  EXPECT_EQ(untouched, (std::vector<float>(4, 0.0f)));
}

TEST(Sampler, PenaltiesIgnoreTokensOutsideTheVocabulary) {
  SamplingParams p;
  p.presence_penalty = 1.0f;
  std::vector<float> logits(3, 0.0f);
  const std::vector<int32_t> recent = {-1, 3, 1000000, 2};
  std::vector<int32_t> scratch;
  apply_penalties(p, logits.data(), 3, recent.data(), recent.size(), scratch);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, 0.0f, -1.0f}));
}

TEST(Sampler, PenaltiesSteerTheSampler) {
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 1.5f;
  Sampler sampler(p);
  std::vector<float> row = {0.0f, 2.0f, 1.0f};
  const std::vector<int32_t> recent = {1};
  EXPECT_EQ(sampler.sample(row.data(), 3, recent.data(), recent.size()).token, 2);
}

TEST(Sampler, NegativeLogitBiasRemovesAToken) {
  SamplingParams p = seeded(11);
  p.logit_bias = {{2, -100.0f}, {-5, 3.0f}, {99, 3.0f}};
  Sampler sampler(p);
  const auto counts = histogram(sampler, kEight, 5000);
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[4], 0);
}

TEST(Sampler, PositiveLogitBiasForcesAToken) {
  SamplingParams p = seeded(12);
  p.logit_bias = {{6, 100.0f}};
  Sampler sampler(p);
  EXPECT_EQ(histogram(sampler, kEight, 5000)[6], 5000);

  p.temperature = 0;
  Sampler greedy(p);
  std::vector<float> row = kEight;
  EXPECT_EQ(greedy.sample(row.data(), vocab_of(row), nullptr, 0).token, 6);
}

TEST(Sampler, LogprobsDescribeTheRawLogits) {
  SamplingParams p = seeded(13);
  p.logprobs = true;
  p.top_logprobs = 3;
  p.temperature = 0.3f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{5, 4.0f}, {7, -1.0f}};
  Sampler sampler(p);
  double max = *std::max_element(kEight.begin(), kEight.end());
  double sum = 0;
  for (float z : kEight) sum += std::exp(z - max);
  std::vector<double> log_softmax;
  for (float z : kEight) log_softmax.push_back(z - max - std::log(sum));

  const std::vector<int32_t> recent = {7, 2, 5};
  std::vector<float> row;
  for (int i = 0; i < 200; ++i) {
    row = kEight;
    const SampleResult r = sampler.sample(row.data(), vocab_of(row), recent.data(), recent.size());
    EXPECT_NEAR(r.logprob, log_softmax[static_cast<size_t>(r.token)], 1e-6);
    ASSERT_EQ(r.top_logprobs.size(), 3u);
    const int32_t expected_top[] = {2, 4, 0};
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(r.top_logprobs[j].token, expected_top[j]);
      EXPECT_NEAR(r.top_logprobs[j].logprob, log_softmax[static_cast<size_t>(expected_top[j])],
                  1e-6);
    }
  }
}

TEST(Sampler, TopLogprobsTiesListTheLowestIdFirst) {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 20;
  Sampler sampler(p);
  std::vector<float> row = {1.0f, 2.0f, 1.0f, 2.0f};
  const SampleResult r = sampler.sample(row.data(), 4, nullptr, 0);
  ASSERT_EQ(r.top_logprobs.size(), 4u);
  const int32_t order[] = {1, 3, 0, 2};
  for (size_t j = 0; j < 4; ++j) EXPECT_EQ(r.top_logprobs[j].token, order[j]);
  EXPECT_NEAR(r.logprob, std::log(std::exp(2.0) / (2 * std::exp(2.0) + 2 * std::exp(1.0))), 1e-6);
}

// Scoring a known token: its raw logprob whatever bias, penalties and temperature say, its
// rank counting only strictly greater logits (a tie shares the better rank), the top
// alternatives asked for, and no step taken from the random stream.
TEST(Sampler, ScoreGivesTheRawLogprobAndRankOfAKnownToken) {
  SamplingParams p = seeded(13);
  p.temperature = 0.3f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{5, 40.0f}};
  Sampler sampler(p);
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, 3.0f, -std::numeric_limits<float>::infinity()};
  double sum = 0;
  for (float z : row) sum += std::exp(double{z} - 3.0);
  const SampleResult tie = sampler.score(row.data(), 5, 3, 2);
  EXPECT_EQ(tie.token, 3);
  EXPECT_NEAR(tie.logprob, -std::log(sum), 1e-6);
  EXPECT_EQ(tie.rank, 1);
  ASSERT_EQ(tie.top_logprobs.size(), 2u);
  EXPECT_EQ(tie.top_logprobs[0].token, 1);
  EXPECT_EQ(tie.top_logprobs[1].token, 3);
  const SampleResult low = sampler.score(row.data(), 5, 0, 0);
  EXPECT_NEAR(low.logprob, 1.0 - 3.0 - std::log(sum), 1e-6);
  EXPECT_EQ(low.rank, 4);
  EXPECT_TRUE(low.top_logprobs.empty());
  const SampleResult never = sampler.score(row.data(), 5, 4, 0);
  EXPECT_EQ(never.logprob, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(never.rank, 5);
  EXPECT_EQ(sampler.step(), 0u);
  EXPECT_THROW(sampler.score(row.data(), 5, 5, 0), std::invalid_argument);
  EXPECT_THROW(sampler.score(row.data(), 5, -1, 0), std::invalid_argument);
}

TEST(Sampler, NoLogprobsUnlessAsked) {
  Sampler sampler(seeded(1));
  std::vector<float> row = kEight;
  const SampleResult r = sampler.sample(row.data(), vocab_of(row), nullptr, 0);
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_TRUE(r.top_logprobs.empty());
}

TEST(Sampler, RejectsInvalidParams) {
  const auto rejects = [](auto change) {
    SamplingParams p;
    change(p);
    EXPECT_THROW(Sampler{p}, std::invalid_argument);
  };
  const float nan = std::nanf("");
  const float inf = INFINITY;
  rejects([](SamplingParams& p) { p.temperature = -0.1f; });
  rejects([&](SamplingParams& p) { p.temperature = nan; });
  rejects([&](SamplingParams& p) { p.temperature = inf; });
  rejects([](SamplingParams& p) { p.top_p = 0.0f; });
  rejects([](SamplingParams& p) { p.top_p = 1.01f; });
  rejects([&](SamplingParams& p) { p.top_p = nan; });
  rejects([](SamplingParams& p) { p.min_p = -0.01f; });
  rejects([](SamplingParams& p) { p.min_p = 1.5f; });
  rejects([&](SamplingParams& p) { p.min_p = nan; });
  rejects([](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  rejects([](SamplingParams& p) { p.repetition_penalty = -1.0f; });
  rejects([&](SamplingParams& p) { p.repetition_penalty = inf; });
  rejects([&](SamplingParams& p) { p.frequency_penalty = nan; });
  rejects([&](SamplingParams& p) { p.presence_penalty = -inf; });
  rejects([](SamplingParams& p) { p.top_logprobs = -1; });
  rejects([](SamplingParams& p) { p.top_logprobs = 21; });
  rejects([](SamplingParams& p) { p.penalty_window = -1; });
  rejects([&](SamplingParams& p) { p.logit_bias = {{3, nan}}; });

  SamplingParams edge;
  edge.temperature = 0;
  edge.top_p = 1;
  edge.min_p = 1;
  edge.top_logprobs = 20;
  edge.penalty_window = 0;
  edge.top_k = -3;
  EXPECT_NO_THROW(Sampler{edge});
}

TEST(Sampler, ErrorsNameTheField) {
  SamplingParams p;
  p.top_p = 2;
  try {
    Sampler sampler(p);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
}

TEST(Sampler, MaskedLogitsAreNeverDrawn) {
  SamplingParams p = seeded(14);
  p.temperature = 2;
  Sampler sampler(p);
  const float ninf = -INFINITY;
  const auto counts = histogram(sampler, {ninf, 0.0f, ninf, 0.0f, ninf}, 2000);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
}

TEST(Sampler, NaNLogitsAreNeverDrawn) {
  for (int32_t vocab : {8, 5000}) {  // the heap path, then the bucket path
    for (int32_t top_k : {0, 3}) {
      SamplingParams p = seeded(15);
      p.top_k = top_k;
      Sampler sampler(p);
      std::vector<float> logits(static_cast<size_t>(vocab), std::nanf(""));
      logits[1] = 0.5f;
      logits[4] = 1.0f;
      logits[6] = 0.0f;
      const auto counts = histogram(sampler, logits, 1000);
      EXPECT_EQ(counts[1] + counts[4] + counts[6], 1000) << "vocab " << vocab << " k " << top_k;
    }
  }
}

}  // namespace
}  // namespace orzo
