#include "kernels/cuda/sampling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/philox.hpp"
#include "runtime/cuda/draw_packing.hpp"
#include "runtime/sampler.hpp"
#include "tests/support/cuda_harness.hpp"

// The GPU sampler against its twin, the CPU Sampler, row by row: same tokens and logprobs for
// the same (logits, params, seed, step). Draws that the kernel computes like the CPU, in the
// same order and precision (greedy, top-k <= kFastTopK), must agree exactly; the radix path
// sums its weights differently, so it may differ where u lands within rounding of a boundary,
// which is rare enough to bound. A chi-square test holds the draws to the exact
// probabilities, so that an off-by-one in the inverse CDF cannot pass.

namespace orzo {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Request {
  SamplingParams params;  // with a seed
  uint64_t step = 0;
  std::vector<int32_t> recent;  // the whole history; the window is cut when packing
  int32_t score_token = -1;     // >= 0: score this token instead of drawing (a prompt row)
  std::vector<uint64_t> mask;   // an output constraint's allowed tokens; empty: none
};

// logits: requests.size() rows of `vocab`.
std::vector<cuda::DeviceSample> sample_on_gpu(const std::vector<float>& logits, int32_t vocab,
                                              const std::vector<Request>& requests) {
  // Packed as the backend packs them: each penalty window cut to its last tokens, the bias
  // kept inside the vocabulary.
  std::vector<DrawPlan> plans;
  for (const Request& r : requests) {
    const size_t window = std::min(r.recent.size(), static_cast<size_t>(r.params.penalty_window));
    plans.push_back(DrawPlan{&r.params, *r.params.seed, r.step, r.recent.data() + (r.recent.size() - window), window,
                             r.score_token, r.mask.empty() ? nullptr : r.mask.data()});
  }
  cuda::PackedDraws packed;
  packed.pack(plans, vocab);
  const auto rows = static_cast<int32_t>(requests.size());
  test::DeviceBuffer<float> d_logits(logits);
  test::DeviceBuffer<cuda::DeviceDraw> d_draws(packed.draws);
  test::DeviceBuffer<int32_t> d_recent(packed.recent);
  test::DeviceBuffer<int32_t> d_bias_tokens(packed.bias_tokens);
  test::DeviceBuffer<float> d_bias_values(packed.bias_values);
  test::DeviceBuffer<uint64_t> d_masks(packed.masks);
  test::DeviceBuffer<unsigned char> workspace(cuda::sampling_workspace_bytes(rows, vocab));
  test::DeviceBuffer<cuda::DeviceSample> out(requests.size());
  cuda::sample_rows(d_logits.get(), rows, vocab, d_draws.get(), d_recent.get(), d_bias_tokens.get(),
                    d_bias_values.get(), d_masks.get(), workspace.get(), out.get(), nullptr);
  return out.download();
}

SampleResult sample_on_cpu(const float* row, int32_t vocab, const Request& r) {
  Sampler sampler(r.params);
  float dummy = 0;
  while (sampler.step() < r.step) sampler.sample(&dummy, 1, nullptr, 0);
  std::vector<float> copy(row, row + vocab);
  TokenMask mask;
  mask.words = r.mask;
  return sampler.sample(copy.data(), vocab, r.recent.data(), r.recent.size(), r.mask.empty() ? nullptr : &mask);
}

// Equal, both NaN, or within the logprob tolerance.
bool near(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= 1e-4f;
}

// Where the kernel repeats the CPU's arithmetic in the CPU's order.
bool computed_like_cpu(const SamplingParams& p, int32_t vocab) {
  const int32_t k = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
  return p.temperature == 0 || p.top_k == 1 || k <= cuda::kFastTopK;
}

struct Agreement {
  int exact_rows = 0;
  int searched_rows = 0;
  int searched_mismatches = 0;
};

// Compares every row; returns the counts the caller bounds.
Agreement compare_rows(const std::vector<float>& logits, int32_t vocab, const std::vector<Request>& requests) {
  const std::vector<cuda::DeviceSample> gpu = sample_on_gpu(logits, vocab, requests);
  Agreement agreement;
  for (size_t r = 0; r < requests.size(); ++r) {
    const Request& request = requests[r];
    const float* row = logits.data() + r * static_cast<size_t>(vocab);
    const SampleResult cpu = sample_on_cpu(row, vocab, request);
    const cuda::DeviceSample& g = gpu[r];
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " row " << r << " T " << request.params.temperature
                                      << " top_k " << request.params.top_k << " top_p " << request.params.top_p
                                      << " min_p " << request.params.min_p << " step " << request.step);
    if (computed_like_cpu(request.params, vocab)) {
      ++agreement.exact_rows;
      EXPECT_EQ(g.token, cpu.token);
    } else {
      ++agreement.searched_rows;
      if (g.token != cpu.token) ++agreement.searched_mismatches;
      EXPECT_GE(g.token, 0);
      EXPECT_LT(g.token, vocab);
    }
    const bool want = request.params.logprobs || request.params.top_logprobs > 0;
    if (want && g.token == cpu.token) {
      EXPECT_PRED2(near, g.logprob, cpu.logprob);
    }
    for (size_t j = 0; j < static_cast<size_t>(cuda::kMaxTopLogprobs); ++j) {
      if (j < cpu.top_logprobs.size()) {
        EXPECT_EQ(g.top_tokens[j], cpu.top_logprobs[j].token) << "top " << j;
        EXPECT_PRED2(near, g.top_logprobs[j], cpu.top_logprobs[j].logprob) << "top " << j;
      } else {
        EXPECT_EQ(g.top_tokens[j], -1) << "top " << j;
      }
    }
  }
  return agreement;
}

// Normal logits with the shapes that test the order: every fourth row has ties at the top,
// every fourth rounded to halves, which ties thousands of tokens.
std::vector<float> random_logits(int32_t rows, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::uniform_int_distribution<int32_t> any_token(0, vocab - 1);
  std::vector<float> logits(static_cast<size_t>(rows) * static_cast<size_t>(vocab));
  for (int32_t r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<size_t>(r) * static_cast<size_t>(vocab);
    for (int32_t i = 0; i < vocab; ++i) row[i] = normal(rng);
    if (r % 4 == 2) {
      const float max = *std::max_element(row, row + vocab);
      row[any_token(rng)] = max;
      row[any_token(rng)] = max;
    } else if (r % 4 == 3) {
      for (int32_t i = 0; i < vocab; ++i) row[i] = std::round(row[i] * 2.0f) / 2.0f;
    }
  }
  return logits;
}

// The most likely `n` tokens of a row (penalties only matter where the mass is).
std::vector<int32_t> top_tokens(const float* row, int32_t vocab, size_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [row](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(n);
  return ids;
}

constexpr float kTemperatures[] = {0.0f, 0.7f, 1.0f, 1.5f};
constexpr int32_t kTopKs[] = {0, 1, 5, 64, 65, 1000};
constexpr float kTopPs[] = {1.0f, 0.9f, 0.5f};
constexpr float kMinPs[] = {0.0f, 0.05f};
constexpr auto kGridCombinations =
    static_cast<int32_t>(std::size(kTemperatures) * std::size(kTopKs) * std::size(kTopPs) * std::size(kMinPs));

// Every combination of temperature, top-k, top-p and min-p, `repeats` times (one row of
// `logits` each), each with its own seed and step, and in turn penalties over a window with
// repeated tokens, a logit bias with repeated entries, and each kind of logprobs.
std::vector<Request> parameter_grid(const std::vector<float>& logits, int32_t vocab, int repeats, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> any_token(0, vocab - 1);
  std::vector<Request> requests;
  int n = 0;
  for (float temperature : kTemperatures) {
    for (int32_t top_k : kTopKs) {
      for (float top_p : kTopPs) {
        for (float min_p : kMinPs) {
          for (int rep = 0; rep < repeats; ++rep, ++n) {
            const float* row = logits.data() + requests.size() * static_cast<size_t>(vocab);
            Request r;
            SamplingParams& p = r.params;
            p.temperature = temperature;
            p.top_k = top_k;
            p.top_p = top_p;
            p.min_p = min_p;
            p.seed = rng();
            r.step = rng() % 500;
            if (n % 3 == 1) {
              p.repetition_penalty = 1.3f;
              p.frequency_penalty = 0.5f;
              p.presence_penalty = 0.4f;
              p.penalty_window = n % 2 ? 64 : 8;
              std::vector<int32_t> pool = top_tokens(row, vocab, std::min<size_t>(6, static_cast<size_t>(vocab)));
              pool.push_back(any_token(rng));
              for (int i = 0; i < 100; ++i) r.recent.push_back(pool[rng() % pool.size()]);
            }
            if (n % 3 == 2) {
              const int32_t favourite = any_token(rng);
              p.logit_bias = {{favourite, 4.0f}, {any_token(rng), -3.0f}, {favourite, 2.5f},
                              {top_tokens(row, vocab, 1)[0], -1.5f}};
            }
            p.logprobs = n % 4 != 0;
            p.top_logprobs = (n / 4) % 3 == 0 ? 0 : (n / 4) % 3 == 1 ? 5 : 20;
            requests.push_back(std::move(r));
          }
        }
      }
    }
  }
  return requests;
}

void expect_agreement_over_grid(int32_t vocab, int repeats, uint32_t seed) {
  const int32_t rows = kGridCombinations * repeats;
  const std::vector<float> logits = random_logits(rows, vocab, seed);
  const Agreement a = compare_rows(logits, vocab, parameter_grid(logits, vocab, repeats, seed));
  std::printf("vocab %d: %d exact rows, %d searched rows, %d searched mismatches\n", vocab, a.exact_rows,
              a.searched_rows, a.searched_mismatches);
  EXPECT_LE(a.searched_mismatches * 200, a.searched_rows) << "more than 0.5% of the searched draws differ";
}

TEST(CudaSampling, SamplingWeightIsTheHostsBitForBit) {
  ORZO_REQUIRE_GPU();
  std::vector<float> x = {0.0f, -0.0f, -87.0f, std::nextafter(-87.0f, 0.0f), std::nextafter(-87.0f, -100.0f),
                          -1e-30f, -1e-7f, 1.0f, 50.0f, kInf, -kInf, kNaN, -std::numeric_limits<float>::denorm_min()};
  for (float v = -90.0f; v <= 0.5f; v += 1.0f / 4096) x.push_back(v);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-88.0f, 0.0f);
  for (int i = 0; i < 200000; ++i) x.push_back(uniform(rng));
  const auto n = static_cast<int32_t>(x.size());
  test::DeviceBuffer<float> d_x(x), d_out(x.size());
  cuda::sampling_weights_on_device(d_x.get(), d_out.get(), n, nullptr);
  const std::vector<float> out = d_out.download();
  int differing = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = sampling_weight(x[i]);
    uint32_t a, b;
    std::memcpy(&a, &out[i], sizeof a);
    std::memcpy(&b, &expected, sizeof b);
    if (a != b && ++differing <= 10) ADD_FAILURE() << "x " << x[i] << ": device " << out[i] << ", host " << expected;
  }
  EXPECT_EQ(differing, 0);
}

TEST(CudaSampling, PhiloxUniformIsTheHostsBitForBit) {
  ORZO_REQUIRE_GPU();
  std::vector<uint64_t> steps;
  for (uint64_t s = 0; s < 4096; ++s) steps.push_back(s);
  for (uint64_t s : {uint64_t{1} << 32, (uint64_t{1} << 32) + 5, ~uint64_t{0}, uint64_t{0x123456789abcdefULL}}) {
    steps.push_back(s);
  }
  const auto n = static_cast<int32_t>(steps.size());
  test::DeviceBuffer<uint64_t> d_steps(steps);
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, ~uint64_t{0}, uint64_t{0xdeadbeefcafef00dULL}}) {
    test::DeviceBuffer<float> d_out(steps.size());
    cuda::philox_uniforms_on_device(seed, d_steps.get(), d_out.get(), n, nullptr);
    const std::vector<float> out = d_out.download();
    for (size_t i = 0; i < steps.size(); ++i) {
      ASSERT_EQ(out[i], philox_uniform(seed, steps[i])) << "seed " << seed << " step " << steps[i];
    }
  }
}

TEST(CudaSampling, MatchesCpuSamplerOnTinyVocab) {
  ORZO_REQUIRE_GPU();
  expect_agreement_over_grid(50, 6, 1);
}

TEST(CudaSampling, MatchesCpuSamplerOnLlamaVocab) {
  ORZO_REQUIRE_GPU();
  // Emulated, one row per combination instead of six: 50 s become 9.
  expect_agreement_over_grid(32000, test::kEmulatedGpu ? 1 : 6, 2);
}

TEST(CudaSampling, MatchesCpuSamplerOnQwenVocab) {
  ORZO_REQUIRE_GPU();
  expect_agreement_over_grid(151936, test::kEmulatedGpu ? 1 : 3, 3);
}

// Rows no model should produce, which must still give the CPU's token (and never a token out
// of range): all -inf, all NaN, a few finite tokens among NaN or -inf, +inf, signed zeros.
TEST(CudaSampling, DegenerateRowsMatchCpuSampler) {
  ORZO_REQUIRE_GPU();
  for (int32_t vocab : {100, 1000}) {
    std::vector<std::vector<float>> shapes;
    shapes.push_back(std::vector<float>(static_cast<size_t>(vocab), -kInf));
    shapes.push_back(std::vector<float>(static_cast<size_t>(vocab), kNaN));
    std::vector<float> islands(static_cast<size_t>(vocab), kNaN);
    islands[7] = 1.0f;
    islands[50] = 0.5f;
    islands[static_cast<size_t>(vocab) - 1] = 0.5f;
    shapes.push_back(islands);
    std::vector<float> masked(static_cast<size_t>(vocab), -kInf);
    masked[3] = 0.25f;
    masked[20] = 2.0f;
    masked[60] = -1.0f;
    masked[static_cast<size_t>(vocab) - 2] = 2.0f;
    shapes.push_back(masked);
    std::vector<float> infinite = random_logits(1, vocab, 11);
    infinite[42] = kInf;
    shapes.push_back(infinite);
    std::vector<float> holes = random_logits(1, vocab, 12);
    holes[static_cast<size_t>(std::max_element(holes.begin(), holes.end()) - holes.begin())] = kNaN;
    for (size_t i = 0; i < holes.size(); i += 7) holes[i] = kNaN;
    shapes.push_back(holes);
    std::vector<float> zeros(static_cast<size_t>(vocab), 0.0f);
    for (size_t i = 0; i < zeros.size(); i += 3) zeros[i] = -0.0f;
    shapes.push_back(zeros);

    std::vector<float> logits;
    std::vector<Request> requests;
    uint64_t seed = 100;
    for (const std::vector<float>& shape : shapes) {
      for (int variant = 0; variant < 5; ++variant) {
        Request r;
        SamplingParams& p = r.params;
        p.seed = seed++;
        r.step = static_cast<uint64_t>(variant) * 3;
        p.logprobs = true;
        p.top_logprobs = 5;
        if (variant == 0) p.temperature = 0;
        if (variant == 2) p.top_p = 0.9f;
        if (variant == 3) p.top_k = 5;
        if (variant == 4) p.min_p = 0.1f;
        logits.insert(logits.end(), shape.begin(), shape.end());
        requests.push_back(std::move(r));
      }
    }
    const std::vector<cuda::DeviceSample> gpu = sample_on_gpu(logits, vocab, requests);
    for (size_t r = 0; r < requests.size(); ++r) {
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " shape " << r / 5 << " variant " << r % 5);
      const SampleResult cpu = sample_on_cpu(logits.data() + r * static_cast<size_t>(vocab), vocab, requests[r]);
      EXPECT_EQ(gpu[r].token, cpu.token);
      EXPECT_PRED2(near, gpu[r].logprob, cpu.logprob);
      for (size_t j = 0; j < 5; ++j) {
        EXPECT_EQ(gpu[r].top_tokens[j], j < cpu.top_logprobs.size() ? cpu.top_logprobs[j].token : -1);
        if (j < cpu.top_logprobs.size()) {
          EXPECT_PRED2(near, gpu[r].top_logprobs[j], cpu.top_logprobs[j].logprob);
        }
      }
    }
  }
}

// The exact probabilities of the stated semantics, computed here in double and independently
// of both samplers: softmax at the temperature, top-k, top-p of what top-k left (boundary
// token included), min-p relative to the most likely, renormalized.
std::vector<double> exact_probabilities(const std::vector<float>& logits, const SamplingParams& p) {
  const auto vocab = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const double max = logits[static_cast<size_t>(order[0])];
  const size_t k = p.top_k > 0 && p.top_k < vocab ? static_cast<size_t>(p.top_k) : logits.size();
  std::vector<double> weight(logits.size(), 0.0);
  double top_mass = 0;
  for (size_t i = 0; i < k; ++i) {
    const auto t = static_cast<size_t>(order[i]);
    weight[t] = std::exp((logits[t] - max) / p.temperature);
    top_mass += weight[t];
  }
  size_t kept = k;
  double walked = 0;
  for (size_t i = 0; i < k && p.top_p < 1; ++i) {
    walked += weight[static_cast<size_t>(order[i])];
    EXPECT_GT(std::fabs(walked - p.top_p * top_mass), 1e-6 * top_mass) << "top-p boundary too close to call";
    if (walked >= p.top_p * top_mass) {
      kept = i + 1;
      break;
    }
  }
  std::vector<double> probability(logits.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < kept; ++i) {
    const auto t = static_cast<size_t>(order[i]);
    if (weight[t] >= p.min_p) probability[t] = weight[t];
    sum += probability[t];
  }
  for (double& x : probability) x /= sum;
  return probability;
}

// 20000 steps of one request over a row whose mass sits on eight scattered tokens, the rest
// 40 nats below them: each configuration's counts against the exact probabilities.
TEST(CudaSampling, DrawsFollowTheExactDistribution) {
  ORZO_REQUIRE_GPU();
  constexpr int32_t kVocab = 1000;
  // Emulated, 2000 draws per configuration (the chi-square test holds at any count).
  const int kDraws = test::kEmulatedGpu ? 2000 : 20000;
  // Chi-square critical values at p = 0.001, by degrees of freedom.
  constexpr double kChiSquare001[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};
  const std::vector<std::pair<int32_t, float>> mass = {{901, 2.0f}, {13, 1.5f},  {500, 1.2f}, {77, 0.7f},
                                                        {640, 0.3f}, {3, 0.0f},   {999, -0.4f}, {250, -1.0f}};
  std::vector<float> row(kVocab, -40.0f);
  for (const auto& [token, logit] : mass) row[static_cast<size_t>(token)] = logit;

  std::vector<SamplingParams> configs(5);
  configs[1].temperature = 0.8f;  // searched, top-p cuts
  configs[1].top_p = 0.75f;
  configs[2].temperature = 1.2f;  // searched top-k (k > kFastTopK), min-p cuts
  configs[2].top_k = 100;
  configs[2].min_p = 0.2f;
  configs[3].top_k = 5;  // shared-memory top-k, then top-p
  configs[3].top_p = 0.9f;
  configs[4].temperature = 1.5f;  // searched, top-p and min-p together
  configs[4].top_p = 0.95f;
  configs[4].min_p = 0.1f;

  std::vector<float> logits;
  for (int i = 0; i < kDraws; ++i) logits.insert(logits.end(), row.begin(), row.end());
  for (size_t c = 0; c < configs.size(); ++c) {
    SCOPED_TRACE(::testing::Message() << "config " << c);
    std::vector<Request> requests(kDraws);
    for (int i = 0; i < kDraws; ++i) {
      requests[static_cast<size_t>(i)].params = configs[c];
      requests[static_cast<size_t>(i)].params.seed = 1234 + c;
      requests[static_cast<size_t>(i)].step = static_cast<uint64_t>(i);
    }
    const std::vector<cuda::DeviceSample> gpu = sample_on_gpu(logits, kVocab, requests);
    std::vector<int> counts(kVocab, 0);
    for (const cuda::DeviceSample& s : gpu) {
      ASSERT_GE(s.token, 0);
      ASSERT_LT(s.token, kVocab);
      ++counts[static_cast<size_t>(s.token)];
    }
    const std::vector<double> p = exact_probabilities(row, configs[c]);
    double chi_square = 0;
    int cells = 0;
    for (size_t t = 0; t < p.size(); ++t) {
      const double expected = p[t] * kDraws;
      if (expected < 1e-3) {  // the tokens 40 nats down, or none at all
        EXPECT_EQ(counts[t], 0) << "token " << t << " has probability " << p[t];
        continue;
      }
      chi_square += (counts[t] - expected) * (counts[t] - expected) / expected;
      ++cells;
    }
    ASSERT_GE(cells, 2);
    ASSERT_LE(cells, 8);
    EXPECT_LT(chi_square, kChiSquare001[cells - 1]) << cells << " tokens";
  }
}

// Shapes are checked before anything touches the device, so these run without a GPU.
// Prompt rows, scored rather than drawn: the token's logprob, its rank (ties do not count
// against it) and the alternatives equal Sampler::score's, mixed in one launch with draws and
// with bias and penalties that a score must ignore.
TEST(CudaSampling, ScoredRowsMatchCpuScore) {
  ORZO_REQUIRE_GPU();
  for (const int32_t vocab : {7, 1000, 49152}) {
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<Request> requests;
    std::vector<float> logits;
    for (int r = 0; r < 24; ++r) {
      Request q;
      q.params.seed = 5;
      q.params.temperature = r % 3 == 0 ? 0.0f : 0.8f;
      q.params.prompt_logprobs = r % 4 == 0 ? 0 : (r % 4 == 1 ? 1 : (r % 4 == 2 ? 5 : cuda::kMaxTopLogprobs));
      q.params.logit_bias = {{1 % vocab, 50.0f}};
      q.params.repetition_penalty = 1.3f;
      q.recent = {0, 1, 2};
      q.score_token = r % 2 == 0 ? static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)) : -1;
      for (int32_t i = 0; i < vocab; ++i) logits.push_back(std::round(normal(rng) * 4.0f) / 4.0f);  // many ties
      if (q.score_token >= 0 && r % 4 == 2) logits[logits.size() - vocab + static_cast<size_t>(q.score_token)] = -kInf;
      requests.push_back(q);
    }
    const std::vector<cuda::DeviceSample> gpu = sample_on_gpu(logits, vocab, requests);
    for (size_t r = 0; r < requests.size(); ++r) {
      const Request& q = requests[r];
      if (q.score_token < 0) continue;
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " row " << r);
      Sampler sampler(q.params);
      const float* row = logits.data() + r * static_cast<size_t>(vocab);
      const SampleResult cpu = sampler.score(row, vocab, q.score_token, q.params.prompt_logprobs);
      EXPECT_EQ(sampler.step(), 0u);
      const cuda::DeviceSample& g = gpu[r];
      EXPECT_EQ(g.token, q.score_token);
      EXPECT_EQ(g.rank, cpu.rank);
      EXPECT_PRED2(near, g.logprob, cpu.logprob);
      ASSERT_EQ(cpu.top_logprobs.size(), static_cast<size_t>(std::min(q.params.prompt_logprobs, vocab)));
      for (size_t j = 0; j < cpu.top_logprobs.size(); ++j) {
        EXPECT_EQ(g.top_tokens[j], cpu.top_logprobs[j].token) << "top " << j;
        EXPECT_PRED2(near, g.top_logprobs[j], cpu.top_logprobs[j].logprob) << "top " << j;
      }
    }
  }
}

// Output constraints: the kernel masks a row as the CPU Sampler does, before bias (a large
// bias on a masked token must not revive it) and penalties, at every temperature.
TEST(CudaSampling, MaskedRowsMatchCpuSampler) {
  ORZO_REQUIRE_GPU();
  for (const int32_t vocab : {5, 1000, 49152}) {
    std::mt19937 rng(static_cast<uint32_t>(vocab) + 1);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<Request> requests;
    std::vector<float> logits;
    for (int r = 0; r < 32; ++r) {
      Request q;
      q.params.seed = 11;
      q.step = static_cast<uint64_t>(r);
      q.params.temperature = r % 4 == 0 ? 0.0f : 1.0f;
      // Past kFastTopK the kernel's radix draw may part from the CPU's within rounding: kept below it.
      q.params.top_k = r % 3 == 0 || vocab > cuda::kFastTopK ? 5 : 0;
      q.params.logprobs = true;
      q.params.logit_bias = {{0, 30.0f}};
      q.recent = {1, 2};
      q.params.repetition_penalty = 1.2f;
      if (r % 5 != 4) {
        q.mask.assign((static_cast<size_t>(vocab) + 63) / 64, 0);
        for (int32_t i = 1; i < vocab; ++i)  // token 0, biased up, never allowed
          if (rng() % (r % 2 ? 3 : 50) == 0 || i == 1 + r % (vocab - 1)) q.mask[static_cast<size_t>(i) >> 6] |= uint64_t{1} << (i & 63);
      }
      for (int32_t i = 0; i < vocab; ++i) logits.push_back(normal(rng));
      requests.push_back(q);
    }
    const std::vector<cuda::DeviceSample> gpu = sample_on_gpu(logits, vocab, requests);
    for (size_t r = 0; r < requests.size(); ++r) {
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " row " << r);
      const Request& q = requests[r];
      const SampleResult cpu = sample_on_cpu(logits.data() + r * static_cast<size_t>(vocab), vocab, q);
      EXPECT_EQ(gpu[r].token, cpu.token);
      EXPECT_PRED2(near, gpu[r].logprob, cpu.logprob);
      if (!q.mask.empty()) {
        EXPECT_NE(gpu[r].token, 0);
        EXPECT_TRUE((q.mask[static_cast<size_t>(gpu[r].token) >> 6] >> (gpu[r].token & 63)) & 1);
      }
    }
  }
}

TEST(CudaSamplingShapes, RejectsVocabOutOfRange) {
  EXPECT_THROW(cuda::sampling_workspace_bytes(1, 0), std::invalid_argument);
  EXPECT_THROW(cuda::sampling_workspace_bytes(1, cuda::kMaxSamplingVocab + 1), std::invalid_argument);
  EXPECT_THROW(cuda::sampling_workspace_bytes(-1, 10), std::invalid_argument);
  EXPECT_THROW(cuda::sample_rows(nullptr, 1, cuda::kMaxSamplingVocab + 1, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::sample_rows(nullptr, -2, 10, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
}

TEST(CudaSamplingShapes, WorkspaceHoldsOneRawRowPerRow) {
  EXPECT_EQ(cuda::sampling_workspace_bytes(3, 151936), size_t{3} * 151936 * sizeof(float));
  EXPECT_EQ(cuda::sampling_workspace_bytes(0, 50), 0u);
  cuda::sample_rows(nullptr, 0, 50, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);  // no rows: no launch
}

}  // namespace
}  // namespace orzo
