#pragma once
// Turns one row of logits into the next token of one request.
//
// The stages, in order (vLLM / llama.cpp conventions):
//   0. an output constraint's mask (grammar/constraint.hpp), when given: every token it does
//      not allow gets -inf, so nothing below can bring it back.
//   1. logit_bias: each entry adds its value to its token's logit; entries add up; ids outside
//      [0, vocab) are skipped (check_request refuses them, against the model's vocab).
//   2. penalties over the last penalty_window tokens of `recent` (see apply_penalties).
//   3. temperature == 0 or top_k == 1: greedy, the highest logit, the lowest id on ties.
//   4. otherwise the logits are divided by the temperature and softmaxed, then
//      top-k keeps the k most likely tokens and renormalizes;
//      top-p keeps the smallest most-likely-first set whose probability reaches top_p of what
//      top-k left (always at least one token, the boundary token included);
//      min-p then keeps those of them with p >= min_p * p_max (top-p has counted the mass
//      of the tokens min-p drops);
//      the survivors are renormalized and one is drawn by inverse CDF.
// Candidates are ordered most likely first (by the final logit), equal logits by ascending
// token id, so a draw is a pure function of (logits, recent, params, seed, step).
//
// The uniform for step n is philox_uniform(seed, n) (core/philox.hpp); the sampler counts
// its steps itself, one per call, greedy calls included, so step n is the request's (n+1)-th
// token. A CUDA sampler using the same uniform and weights (sampling_weight) makes the same
// draws, except where u falls within summation rounding of the boundary between two tokens.
//
// Logprobs describe the raw model distribution, the log-softmax of the logits as they arrive,
// before bias, penalties and temperature (vLLM V1's default).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/sampling_params.hpp"
#include "core/token_mask.hpp"

namespace orzo {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token;
  float logprob = 0;                       // filled when params.logprobs or top_logprobs > 0
  std::vector<TokenLogprob> top_logprobs;  // the top_logprobs most likely, most likely first
  int32_t rank = 0;  // score() only: 1 + how many tokens have a greater logit (vLLM's rank)
};

// Stage 2 alone, in place. Over the last min(penalty_window, n_recent) entries of `recent`,
// each distinct token t in [0, vocab) seen c times gets
//   logit = logit > 0 ? logit / repetition_penalty : logit * repetition_penalty
//   logit -= c * frequency_penalty
//   logit -= presence_penalty
// `scratch` is working memory, kept by the caller so that repeated calls do not allocate.
void apply_penalties(const SamplingParams& params, float* logits, int32_t vocab,
                     const int32_t* recent, size_t n_recent, std::vector<int32_t>& scratch);

// Stage 0 alone, in place: -inf for every token `mask` does not allow.
void apply_mask(const TokenMask& mask, float* logits, int32_t vocab);

// exp(x) for x <= 0 (x > 0 gives 1), within 8e-8 relative (checked for every float in
// (-87, 0)); 0 below -87 and for NaN.
// The candidates' weights, exp((logit - max logit) / temperature), come from this function:
// exp_nonpositive (core/exp_nonpositive.hpp), plain float operations and fma, which
// vectorize here and which the CUDA sampling kernel compiles from the same definition, so
// both give the same bits where std::exp differs from one math library to the next.
float sampling_weight(float x);

class Sampler {
 public:
  // Throws std::invalid_argument with sampling_problem's message (core/sampling_params.hpp) for
  // params it cannot run; without params.seed, the seed comes from std::random_device.
  explicit Sampler(SamplingParams params);

  // `logits`: one row of `vocab` floats, used as scratch (masked, biased and penalized in
  // place). `recent`: the request's tokens so far, prompt then generated, oldest first.
  // `mask`: the tokens an output constraint allows (at least one), or null.
  SampleResult sample(float* logits, int32_t vocab, const int32_t* recent, size_t n_recent,
                      const TokenMask* mask = nullptr);

  // Scores a token already known (the next prompt token) instead of drawing one: its logprob
  // and rank in the raw distribution, and the `top` most likely alternatives. No step is
  // taken, so the draws that follow are those of a request that scored nothing.
  SampleResult score(const float* logits, int32_t vocab, int32_t token, int32_t top);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }  // the step index the next call will use
  // Hands out the next step index without drawing: a device sampler draws with it instead.
  uint64_t take_step() { return step_++; }
  // Continues a request that drew `step` tokens elsewhere: the draws that follow are those
  // it would have made there.
  void resume_at(uint64_t step) { step_ = step; }

 private:
  struct Candidate {
    float logit;
    int32_t token;
    float weight;  // exp((logit - max logit) / temperature), once known
  };
  // The draw walks the candidates most likely first. Grouping them into buckets by weight (a
  // fixed fraction of an octave each) lets a walk step over a whole bucket by its totals and
  // sort only the bucket where it stops, instead of sorting the vocabulary.
  struct Bucket {
    size_t count = 0;
    double mass = 0;       // sum of the weights
    double kept_mass = 0;  // sum of the weights that pass min-p
  };
  struct Walk {
    size_t position = 0;  // candidates passed
    double mass = 0;
    double kept_mass = 0;
  };
  static constexpr size_t kBuckets = 1009;       // 1008 for positive weights, then kZeroBucket
  static constexpr uint16_t kZeroBucket = 1008;  // weights that underflowed to 0
  static constexpr uint16_t kNoBucket = 1009;    // NaN logits: never candidates

  // The log normalizer of the raw row, and its `top` most likely tokens into result.
  double compute_logprobs(const float* logits, int32_t vocab, int32_t top, SampleResult& result);
  void remember_raw_logits(const float* logits, int32_t vocab, const int32_t* recent,
                           size_t n_recent);
  float raw_logit(const float* logits, int32_t token) const;
  void apply_bias(float* logits, int32_t vocab) const;
  int32_t draw(const float* logits, int32_t vocab, float u);
  bool gather_top_k(const float* logits, int32_t vocab, int32_t k);
  bool gather_all(const float* logits, int32_t vocab);
  float kept_weight(float weight) const;
  void load_bucket(const float* logits, size_t bucket);
  template <typename Done>
  int32_t advance(const float* logits, Walk& walk, size_t limit, const Done& done);

  SamplingParams params_;
  uint64_t seed_;
  uint64_t step_ = 0;
  // Reused across calls: sample() allocates nothing once these have grown.
  std::vector<float> weights_;         // per token, gather_all only
  std::vector<uint16_t> bucket_of_;    // per token, gather_all only
  std::vector<Bucket> buckets_;        // one for the top-k heap path, kBuckets otherwise
  std::vector<Bucket> partial_;        // gather_all's per-lane tables
  std::vector<Candidate> candidates_;  // the sorted members of bucket loaded_bucket_
  size_t loaded_bucket_ = 0;
  std::vector<Candidate> top_raw_;
  std::vector<Candidate> raw_touched_;
  std::vector<int32_t> penalty_scratch_;
};

}  // namespace orzo
