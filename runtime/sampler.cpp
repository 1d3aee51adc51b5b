#include "runtime/sampler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/exp_nonpositive.hpp"
#include "core/philox.hpp"
#include "kernels/cpu/sampler_rows.hpp"

namespace orzo {
namespace {

// NaN logits are never candidates: comparisons with NaN would break the strict weak ordering
// that std::sort and the heap algorithms rely on.
bool is_nan(float x) { return x != x; }

// The last min(window, n_recent) tokens of `recent`.
std::pair<const int32_t*, size_t> penalty_window(const int32_t* recent, size_t n_recent,
                                                 int32_t window) {
  const size_t n = std::min(n_recent, static_cast<size_t>(std::max(window, 0)));
  return {recent + (n_recent - n), n};
}

// The lowest id among the highest logits; 0 when every logit is NaN.
int32_t argmax(const float* logits, int32_t vocab) {
  const float max = cpu::max_row(logits, vocab);
  for (int32_t i = 0; i < vocab; ++i) {
    if (logits[i] == max) return i;
  }
  return 0;
}

// Most likely first; equal logits by ascending id so that every order is deterministic.
struct MoreLikely {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  }
};

// A bounded heap whose front is the least likely survivor, instead of sorting the whole
// vocabulary. Once it is full, most logits are not above that survivor, and the vector unit
// passes over them (cpu::first_above). Leaves `out` sorted most likely first.
template <typename C>
void select_top_k(const float* logits, int32_t vocab, int32_t k, std::vector<C>& out) {
  out.clear();
  if (k <= 0) return;
  const auto limit = static_cast<size_t>(k);
  const MoreLikely more_likely;
  const auto offer = [&](int32_t i) {
    if (is_nan(logits[i])) return;
    const C c{logits[i], i, 0.0f};
    if (out.size() < limit) {
      out.push_back(c);
      std::push_heap(out.begin(), out.end(), more_likely);
    } else if (more_likely(c, out.front())) {
      std::pop_heap(out.begin(), out.end(), more_likely);
      out.back() = c;
      std::push_heap(out.begin(), out.end(), more_likely);
    }
  };
  int32_t i = 0;
  for (; i < vocab && out.size() < limit; ++i) offer(i);
  // Full from here on. Strictly above: an equal logit further on has a larger id than the
  // survivor, so loses to it.
  while (i < vocab) {
    i = static_cast<int32_t>(cpu::first_above(logits, i, vocab, out.front().logit));
    if (i < vocab) offer(i++);
  }
  std::sort_heap(out.begin(), out.end(), more_likely);
}

// Beyond this k, the heap's O(k log k) upkeep costs more than bucketing the whole vocabulary;
// below it, bucketing's fixed cost (some thousand buckets) is the larger.
constexpr int32_t kMaxHeapTopK = 1024;

}  // namespace

float sampling_weight(float x) { return exp_nonpositive(x); }

void apply_penalties(const SamplingParams& params, float* logits, int32_t vocab,
                     const int32_t* recent, size_t n_recent, std::vector<int32_t>& scratch) {
  const bool off = params.repetition_penalty == 1.0f && params.frequency_penalty == 0.0f &&
                   params.presence_penalty == 0.0f;
  const auto [window, n] = penalty_window(recent, n_recent, params.penalty_window);
  if (off || n == 0) return;
  // Sorting the window groups each token's occurrences without a vocab-sized count array.
  scratch.assign(window, window + n);
  std::sort(scratch.begin(), scratch.end());
  for (size_t i = 0; i < n;) {
    const int32_t token = scratch[i];
    size_t end = i + 1;
    while (end < n && scratch[end] == token) ++end;
    const auto count = static_cast<float>(end - i);
    i = end;
    if (token < 0 || token >= vocab) continue;
    float& z = logits[token];
    z = z > 0 ? z / params.repetition_penalty : z * params.repetition_penalty;
    z -= count * params.frequency_penalty;
    z -= params.presence_penalty;
  }
}

Sampler::Sampler(SamplingParams params) : params_(std::move(params)) {
  if (auto problem = sampling_problem(params_)) throw std::invalid_argument(problem->message);
  if (params_.seed) {
    seed_ = *params_.seed;
  } else {
    std::random_device device;
    seed_ = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
}

void apply_mask(const TokenMask& mask, float* logits, int32_t vocab) {
  cpu::mask_row(mask.words.data(), logits, vocab);
}

SampleResult Sampler::sample(float* logits, int32_t vocab, const int32_t* recent, size_t n_recent,
                             const TokenMask* mask) {
  if (vocab <= 0) throw std::invalid_argument("Sampler::sample: vocab must be positive");
  SampleResult result{};
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  double log_norm = 0;
  if (want_logprobs) {
    log_norm = compute_logprobs(logits, vocab, params_.top_logprobs, result);
    remember_raw_logits(logits, vocab, recent, n_recent);
  }

  if (mask) apply_mask(*mask, logits, vocab);
  apply_bias(logits, vocab);
  apply_penalties(params_, logits, vocab, recent, n_recent, penalty_scratch_);

  // The step advances on every call, greedy included, so step n always means token n.
  const float u = philox_uniform(seed_, step_++);
  const bool greedy = params_.temperature == 0.0f || params_.top_k == 1;
  result.token = greedy ? argmax(logits, vocab) : draw(logits, vocab, u);
  if (want_logprobs) {
    result.logprob = static_cast<float>(double{raw_logit(logits, result.token)} - log_norm);
  }
  return result;
}

SampleResult Sampler::score(const float* logits, int32_t vocab, int32_t token, int32_t top) {
  if (vocab <= 0) throw std::invalid_argument("Sampler::score: vocab must be positive");
  if (token < 0 || token >= vocab)
    throw std::invalid_argument("Sampler::score: token " + std::to_string(token) + " is outside the vocabulary");
  SampleResult result{};
  result.token = token;
  const double log_norm = compute_logprobs(logits, vocab, top, result);
  result.logprob = static_cast<float>(double{logits[token]} - log_norm);
  const float z = logits[token];
  int32_t above = 0;
  for (int32_t i = 0; i < vocab; ++i) above += logits[i] > z;
  result.rank = above + 1;
  return result;
}

double Sampler::compute_logprobs(const float* logits, int32_t vocab, int32_t top, SampleResult& result) {
  const float max = cpu::max_row(logits, vocab);
  // Exponentials first, into the weights scratch, then a sum over independent lanes: each loop
  // vectorizes on its own. exp_nonpositive's error, under 1e-7 relative, is below a float ulp
  // of a typical logprob. NaN logits weigh 0.
  weights_.resize(static_cast<size_t>(vocab));
  float* const exps = weights_.data();
  cpu::exp_rows(logits, vocab, max, 1.0f, exps);
  constexpr int32_t kLanes = 8;
  std::array<double, kLanes> lanes{};
  int32_t i = 0;
  for (; i + kLanes <= vocab; i += kLanes) {
    for (int32_t j = 0; j < kLanes; ++j) lanes[j] += exps[i + j];
  }
  for (; i < vocab; ++i) lanes[0] += exps[i];
  double sum = 0;
  for (double lane : lanes) sum += lane;
  const double log_norm = max + std::log(sum);

  select_top_k(logits, vocab, std::min(top, vocab), top_raw_);
  result.top_logprobs.reserve(top_raw_.size());
  for (const Candidate& c : top_raw_) {
    result.top_logprobs.push_back({c.token, static_cast<float>(double{c.logit} - log_norm)});
  }
  return log_norm;
}

// Bias and penalties only ever write the tokens recorded here, so these and the untouched
// rest of the row still give the raw logit of whichever token is drawn, without copying the row.
void Sampler::remember_raw_logits(const float* logits, int32_t vocab, const int32_t* recent,
                                  size_t n_recent) {
  raw_touched_.clear();
  for (const auto& entry : params_.logit_bias) {
    if (entry.first >= 0 && entry.first < vocab) {
      raw_touched_.push_back({logits[entry.first], entry.first, 0});
    }
  }
  const auto [window, n] = penalty_window(recent, n_recent, params_.penalty_window);
  for (size_t i = 0; i < n; ++i) {
    if (window[i] >= 0 && window[i] < vocab) {
      raw_touched_.push_back({logits[window[i]], window[i], 0});
    }
  }
}

float Sampler::raw_logit(const float* logits, int32_t token) const {
  for (const Candidate& c : raw_touched_) {
    if (c.token == token) return c.logit;
  }
  return logits[token];
}

void Sampler::apply_bias(float* logits, int32_t vocab) const {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && token < vocab) logits[token] += bias;
  }
}

float Sampler::kept_weight(float weight) const { return weight >= params_.min_p ? weight : 0.0f; }

// Small k: the heap's k survivors, already sorted, form the only bucket.
bool Sampler::gather_top_k(const float* logits, int32_t vocab, int32_t k) {
  select_top_k(logits, vocab, k, candidates_);
  if (candidates_.empty() || !std::isfinite(candidates_.front().logit)) return false;
  const float max = candidates_.front().logit;
  Bucket all;
  for (Candidate& c : candidates_) {
    c.weight = exp_nonpositive((c.logit - max) / params_.temperature);
    ++all.count;
    all.mass += c.weight;
    all.kept_mass += kept_weight(c.weight);
  }
  buckets_.assign(1, all);
  loaded_bucket_ = 0;
  return true;
}

bool Sampler::gather_all(const float* logits, int32_t vocab) {
  const float max = cpu::max_row(logits, vocab);
  if (!std::isfinite(max)) return false;
  // Eight buckets per halving of the weight down to the smallest positive one, so that the
  // bucket where a walk stops holds few tokens, for flat distributions and deep tails alike.
  constexpr float kBucketsPerNat = 8.0f / 0.693147180559945f;
  constexpr auto kDeepest = static_cast<float>(kZeroBucket - 1);
  const float temperature = params_.temperature;
  weights_.resize(static_cast<size_t>(vocab));
  bucket_of_.resize(static_cast<size_t>(vocab));
  // Raw pointers: the compiler cannot prove that stores through a uint16_t* leave the vectors'
  // own pointers alone, and would reload them for every token.
  float* const weights = weights_.data();
  uint16_t* const bucket_of = bucket_of_.data();
  cpu::exp_rows(logits, vocab, max, temperature, weights);
  cpu::bucket_rows(logits, weights, vocab, {max, temperature, kBucketsPerNat, kDeepest, kZeroBucket, kNoBucket}, bucket_of);
  // Interleaved partial tables: neighbouring tokens often share a bucket, and with a single
  // table every update would wait on the store of the one before. NaN logits (weight 0) have a
  // slot of their own, sparing the loop a branch.
  constexpr size_t kPartialLanes = 4;
  constexpr size_t kSlots = kBuckets + 1;
  partial_.assign(kPartialLanes * kSlots, Bucket{});
  Bucket* const partial = partial_.data();
  const float min_p = params_.min_p;
  for (int32_t i = 0; i < vocab; ++i) {
    Bucket& slot = partial[static_cast<size_t>(i) % kPartialLanes * kSlots + bucket_of[i]];
    const float w = weights[i];
    ++slot.count;
    slot.mass += w;
    slot.kept_mass += w >= min_p ? w : 0.0f;
  }
  buckets_.assign(kBuckets, Bucket{});
  for (size_t lane = 0; lane < kPartialLanes; ++lane) {
    for (size_t b = 0; b < kBuckets; ++b) {
      const Bucket& slot = partial[lane * kSlots + b];
      buckets_[b].count += slot.count;
      buckets_[b].mass += slot.mass;
      buckets_[b].kept_mass += slot.kept_mass;
    }
  }
  loaded_bucket_ = kBuckets;
  return true;
}

void Sampler::load_bucket(const float* logits, size_t bucket) {
  if (bucket == loaded_bucket_) return;
  candidates_.clear();
  const auto wanted = static_cast<uint16_t>(bucket);
  const uint16_t* const bucket_of = bucket_of_.data();
  const size_t n = bucket_of_.size();
  const auto take = [&](size_t i) {
    if (bucket_of[i] == wanted) {
      candidates_.push_back({logits[i], static_cast<int32_t>(i), weights_[i]});
    }
  };
  // Most blocks hold no member of the bucket; one vectorized comparison skips each of those.
  constexpr size_t kBlock = 32;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int32_t members = 0;
    for (size_t j = 0; j < kBlock; ++j) members += bucket_of[i + j] == wanted;
    if (members == 0) continue;
    for (size_t j = 0; j < kBlock; ++j) take(i + j);
  }
  for (; i < n; ++i) take(i);
  std::sort(candidates_.begin(), candidates_.end(), MoreLikely{});
  loaded_bucket_ = bucket;
}

// Walks the candidates most likely first from the start of `walk`, over at most `limit` of
// them, and returns the token after which done(walk) first holds, or -1 if it never does.
// done must be monotone: false, then true for every longer prefix. A bucket is taken whole
// from its totals when that stays within the limit and leaves done false; otherwise it is
// sorted and walked token by token. Totals and token sums round differently, so the walk
// carries on into the next bucket should the tokens fall short of what the totals promised.
template <typename Done>
int32_t Sampler::advance(const float* logits, Walk& walk, size_t limit, const Done& done) {
  for (size_t b = 0; b < buckets_.size() && walk.position < limit; ++b) {
    const Bucket& bucket = buckets_[b];
    if (bucket.count == 0) continue;
    if (bucket.mass == 0) {  // weights of 0 change no sum, so their order does not matter
      walk.position = std::min(limit, walk.position + bucket.count);
      continue;
    }
    const Walk whole{walk.position + bucket.count, walk.mass + bucket.mass,
                     walk.kept_mass + bucket.kept_mass};
    if (whole.position <= limit && !done(whole)) {
      walk = whole;
      continue;
    }
    load_bucket(logits, b);
    for (const Candidate& c : candidates_) {
      if (walk.position == limit) break;
      ++walk.position;
      walk.mass += c.weight;
      walk.kept_mass += kept_weight(c.weight);
      if (done(walk)) return c.token;
    }
  }
  return -1;
}

int32_t Sampler::draw(const float* logits, int32_t vocab, float u) {
  // Top-k: a prefix of `top.position` candidates, `top` summing it. Without top-k every token
  // is a candidate, and a small vocabulary takes the heap path whole.
  const int32_t k = params_.top_k > 0 && params_.top_k < vocab ? params_.top_k : vocab;
  Walk top;
  if (k <= kMaxHeapTopK) {
    if (!gather_top_k(logits, vocab, k)) return argmax(logits, vocab);
    top = {buckets_[0].count, buckets_[0].mass, buckets_[0].kept_mass};
  } else {
    if (!gather_all(logits, vocab)) return argmax(logits, vocab);
    size_t present = 0;
    for (const Bucket& b : buckets_) present += b.count;
    if (static_cast<size_t>(k) < present) {
      advance(logits, top, static_cast<size_t>(k), [](const Walk&) { return false; });
    } else {
      for (const Bucket& b : buckets_) {
        top = {top.position + b.count, top.mass + b.mass, top.kept_mass + b.kept_mass};
      }
    }
  }

  // Top-p within what top-k left: the shortest prefix reaching top_p of its mass.
  Walk kept = top;
  if (params_.top_p < 1) {
    const double needed = params_.top_p * top.mass;
    kept = Walk{};
    advance(logits, kept, top.position, [needed](const Walk& w) { return w.mass >= needed; });
  }

  // Min-p is folded into kept_mass; the inverse CDF picks the first candidate whose cumulative
  // kept weight exceeds u times the total. Tokens of zero kept weight never do.
  const double target = u * kept.kept_mass;
  Walk walk;
  const int32_t token = advance(logits, walk, kept.position,
                                [target](const Walk& w) { return w.kept_mass > target; });
  // u <= 1 - 2^-24 keeps the target below the kept mass by far more than the double sums'
  // rounding, so the walk always ends on a token; the argmax only guards against the impossible.
  return token >= 0 ? token : argmax(logits, vocab);
}

}  // namespace orzo
