#include "kernels/cuda/sampling.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/exp_nonpositive.hpp"
#include "core/philox.hpp"
#include "kernels/cuda/check.hpp"

// One block walks one row through the CPU Sampler's stages. Where the CPU sorts (top-k heap,
// buckets), the block searches instead: every token has a unique 64-bit order key (final
// logit descending, then id ascending), and a radix search over those keys finds the first
// token whose inclusive prefix sums (count, weight, weight kept by min-p) satisfy a monotone
// condition: the k-th token for top-k, the top-p boundary, the token the uniform lands on.
// The weights are summed in fixed point, so every histogram bin equals the sum of its
// sub-bins exactly and the search narrows consistently whatever order the atomics ran in.
// Small candidate sets (top-k <= kFastTopK, top logprobs) are instead collected into shared
// memory and sorted, and one thread repeats the CPU's double sums in the CPU's order, which
// makes those draws equal to the CPU's bit for bit.
//
// Floating point here is written with the _rn intrinsics wherever the CPU code has a separate
// multiply and add, so that nvcc cannot contract them into an fma the CPU does not do.

namespace orzo::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRadixBits = 8;
constexpr int kBins = 1 << kRadixBits;
constexpr int kLevels = 64 / kRadixBits;
constexpr int kBinsPerLane = kBins / 32;
constexpr int kMaxCandidates = kFastTopK;
static_assert(kMaxTopLogprobs <= kMaxCandidates, "top logprobs use the candidate arrays");
// w * 2^43 is an integer for every weight >= 2^-19, so only the weights below that round; and
// kMaxSamplingVocab weights of at most 1 sum to at most 2^63.
constexpr float kFixedOne = 0x1p43f;
static_assert(kMaxSamplingVocab <= (1 << 20), "fixed-point sums would overflow");

__device__ bool is_nan(float x) { return x != x; }

// Ascending keys run most likely first: higher logit, then lower id. -0 is taken as +0, as
// the CPU's comparisons do. Never called for NaN.
__device__ uint64_t order_key(float logit, int32_t token) {
  const uint32_t bits = __float_as_uint(logit == 0.0f ? 0.0f : logit);
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t{~ascending} << 32) | static_cast<uint32_t>(token);
}

__device__ bool more_likely(float a_logit, int32_t a_token, float b_logit, int32_t b_token) {
  return a_logit > b_logit || (a_logit == b_logit && a_token < b_token);
}

// Prefix sums over tokens in key order: how many, their weights and their min-p kept weights,
// both weights in fixed point (kFixedOne = weight 1).
struct Sums {
  unsigned long long count, mass, kept;
};

__device__ Sums operator+(const Sums& a, const Sums& b) {
  return {a.count + b.count, a.mass + b.mass, a.kept + b.kept};
}
__device__ Sums operator-(const Sums& a, const Sums& b) {
  return {a.count - b.count, a.mass - b.mass, a.kept - b.kept};
}

// A token's weight as the draw sees it; unweighted searches (top logprobs, top-k boundaries
// of the fast path) only count.
struct Weigher {
  bool weighted;
  float max;
  float temperature;
  float min_p;

  __device__ void operator()(float logit, unsigned long long& mass, unsigned long long& kept) const {
    if (!weighted) {
      mass = kept = 0;
      return;
    }
    const float weight = exp_nonpositive(__fdiv_rn(__fsub_rn(logit, max), temperature));
    mass = __float2ull_rn(__fmul_rn(weight, kFixedOne));
    kept = weight >= min_p ? mass : 0;
  }
};

struct Found {
  bool found;
  int32_t token;
  uint64_t key;
  Sums through;  // found: the sums up to and including the token; otherwise the row's totals
};

struct Shared {
  unsigned long long bin_count[kBins], bin_mass[kBins], bin_kept[kBins];
  unsigned long long stage_mass[kWarps][32], stage_kept[kWarps][32];
  int chosen_digit;
  Sums chosen_before, chosen_through;
  unsigned long long chosen_count;
  int32_t token;
  int32_t above;  // a scored token's rank, less one
  float reduce_float[kWarps];
  int32_t reduce_token[kWarps];
  double reduce_double[kWarps];
  int n_candidates;
  uint64_t candidate_key[kMaxCandidates];
  float candidate_logit[kMaxCandidates];
  int32_t candidate_token[kMaxCandidates];
  float sorted_logit[kMaxCandidates];
  int32_t sorted_token[kMaxCandidates];
};

__device__ int warp_id() { return static_cast<int>(threadIdx.x) / 32; }
__device__ int lane_id() { return static_cast<int>(threadIdx.x) % 32; }

// The largest non-NaN logit (-inf when there is none); copies the row to `copy` on the way
// when given one.
__device__ float row_max(const float* row, int32_t vocab, float* copy, Shared& s) {
  float m = -INFINITY;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) {
    const float z = row[i];
    if (copy) copy[i] = z;
    m = z > m ? z : m;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, m, offset);
    m = other > m ? other : m;
  }
  if (lane_id() == 0) s.reduce_float[warp_id()] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m = s.reduce_float[w] > m ? s.reduce_float[w] : m;
  __syncthreads();
  return m;
}

// sum over the row of sampling_weight(logit - max), in double.
__device__ double row_exp_sum(const float* row, int32_t vocab, float max, Shared& s) {
  double sum = 0;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) {
    sum += exp_nonpositive(__fsub_rn(row[i], max));
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (lane_id() == 0) s.reduce_double[warp_id()] = sum;
  __syncthreads();
  sum = 0;
  for (int w = 0; w < kWarps; ++w) sum += s.reduce_double[w];
  __syncthreads();
  return sum;
}

// The CPU's argmax: the lowest id among the highest logits, NaN never winning; 0 when every
// logit is NaN.
__device__ int32_t row_argmax(const float* row, int32_t vocab, Shared& s) {
  float best = 0;
  int32_t best_token = -1;
  const auto offer = [&](float z, int32_t token) {
    if (token < 0 || is_nan(z)) return;
    if (best_token < 0 || more_likely(z, token, best, best_token)) {
      best = z;
      best_token = token;
    }
  };
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) offer(row[i], i);
  for (int offset = 16; offset > 0; offset /= 2) {
    const float z = __shfl_xor_sync(kFullMask, best, offset);
    const int32_t token = __shfl_xor_sync(kFullMask, best_token, offset);
    offer(z, token);
  }
  if (lane_id() == 0) {
    s.reduce_float[warp_id()] = best;
    s.reduce_token[warp_id()] = best_token;
  }
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) offer(s.reduce_float[w], s.reduce_token[w]);
  __syncthreads();
  return best_token < 0 ? 0 : best_token;
}

// Adds one token per lane (digit < 0: none) to the bins. Lanes of equal digit are summed by
// their lowest lane first, since most tokens of a row share the leading digits and a shared
// atomic per token would serialize on one bin. Past the first levels most warps hold no token
// of the prefix, and the first digits of a row are mostly one: both cases take a short cut.
__device__ void add_to_bins(Shared& s, int digit, unsigned long long mass, unsigned long long kept) {
  if (__ballot_sync(kFullMask, digit >= 0) == 0) return;
  const int warp = warp_id(), lane = lane_id();
  const unsigned peers = __match_any_sync(kFullMask, digit);
  if (peers == kFullMask) {  // the same for every lane: the branch keeps the warp together
    for (int offset = 16; offset > 0; offset /= 2) {
      mass += __shfl_xor_sync(kFullMask, mass, offset);
      kept += __shfl_xor_sync(kFullMask, kept, offset);
    }
    if (lane == 0) {
      atomicAdd(&s.bin_count[digit], 32ull);
      atomicAdd(&s.bin_mass[digit], mass);
      atomicAdd(&s.bin_kept[digit], kept);
    }
    return;
  }
  s.stage_mass[warp][lane] = mass;
  s.stage_kept[warp][lane] = kept;
  __syncwarp();
  if (digit >= 0 && lane == __ffs(peers) - 1) {
    unsigned long long group_mass = 0, group_kept = 0;
    for (unsigned rest = peers; rest != 0; rest &= rest - 1) {
      const int peer = __ffs(rest) - 1;
      group_mass += s.stage_mass[warp][peer];
      group_kept += s.stage_kept[warp][peer];
    }
    atomicAdd(&s.bin_count[digit], static_cast<unsigned long long>(__popc(peers)));
    atomicAdd(&s.bin_mass[digit], group_mass);
    atomicAdd(&s.bin_kept[digit], group_kept);
  }
  __syncwarp();
}

// Warp 0: the first bin whose inclusive sums (from `base`) satisfy `done`, into s.chosen_*.
template <typename Done>
__device__ void choose_bin(Shared& s, const Sums& base, const Done& done) {
  const int lane = lane_id();
  const int first = lane * kBinsPerLane;
  Sums own{0, 0, 0};
  for (int b = first; b < first + kBinsPerLane; ++b) own = own + Sums{s.bin_count[b], s.bin_mass[b], s.bin_kept[b]};
  Sums inclusive = own;
  for (int offset = 1; offset < 32; offset *= 2) {
    const Sums up{__shfl_up_sync(kFullMask, inclusive.count, offset),
                  __shfl_up_sync(kFullMask, inclusive.mass, offset),
                  __shfl_up_sync(kFullMask, inclusive.kept, offset)};
    if (lane >= offset) inclusive = inclusive + up;
  }
  Sums running = base + (inclusive - own);
  Sums before = running;
  int hit = -1;
  for (int b = first; b < first + kBinsPerLane; ++b) {
    before = running;
    running = running + Sums{s.bin_count[b], s.bin_mass[b], s.bin_kept[b]};
    if (done(running)) {
      hit = b;
      break;
    }
  }
  const unsigned hits = __ballot_sync(kFullMask, hit >= 0);
  if (hits == 0) {
    if (lane == 31) {  // its running sums end after the last bin: the totals
      s.chosen_digit = -1;
      s.chosen_through = running;
    }
  } else if (lane == __ffs(hits) - 1) {
    s.chosen_digit = hit;
    s.chosen_before = before;
    s.chosen_through = running;
    s.chosen_count = s.bin_count[hit];
  }
}

// The first non-NaN token, in key order, whose inclusive sums satisfy `done` (monotone: false,
// then true for every longer prefix). Each level histograms the next 8 key bits of the tokens
// that share the prefix found so far; a bin holding one token ends the search early.
template <typename Done>
__device__ Found radix_find(const float* row, int32_t vocab, const Weigher& weigh, const Done& done,
                            Shared& s) {
  uint64_t prefix = 0;
  Sums base{0, 0, 0};
  for (int level = 0; level < kLevels; ++level) {
    const int shift = 64 - kRadixBits * (level + 1);
    for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) {
      s.bin_count[b] = s.bin_mass[b] = s.bin_kept[b] = 0;
    }
    __syncthreads();
    // The loop bound is the same for every lane of a warp, as __match_any_sync needs.
    for (int32_t start = warp_id() * 32; start < vocab; start += kThreads) {
      const int32_t i = start + lane_id();
      int digit = -1;
      unsigned long long mass = 0, kept = 0;
      if (i < vocab) {
        const float z = row[i];
        if (!is_nan(z)) {
          const uint64_t key = order_key(z, i);
          if (level == 0 || (key >> (shift + kRadixBits)) == prefix) {
            digit = static_cast<int>((key >> shift) & (kBins - 1));
            weigh(z, mass, kept);
          }
        }
      }
      add_to_bins(s, digit, mass, kept);
    }
    __syncthreads();
    if (warp_id() == 0) choose_bin(s, base, done);
    __syncthreads();
    const int digit = s.chosen_digit;
    const Sums through = s.chosen_through;
    const Sums before = digit >= 0 ? s.chosen_before : Sums{0, 0, 0};
    const unsigned long long count = digit >= 0 ? s.chosen_count : 0;
    __syncthreads();  // everyone has read s.chosen_* before anyone may write it again
    if (digit < 0) return {false, -1, 0, through};
    prefix = (prefix << kRadixBits) | static_cast<uint64_t>(digit);
    base = before;
    if (level == kLevels - 1) return {true, static_cast<int32_t>(static_cast<uint32_t>(prefix)), prefix, through};
    if (count == 1) {
      if (threadIdx.x == 0) s.token = -1;
      __syncthreads();
      for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) {
        const float z = row[i];
        if (!is_nan(z) && (order_key(z, i) >> shift) == prefix) s.token = i;  // exactly one
      }
      __syncthreads();
      const int32_t token = s.token;
      __syncthreads();
      if (token < 0) return {false, -1, 0, through};  // unreachable: the bin counted it
      return {true, token, order_key(row[token], token), through};
    }
  }
  return {false, -1, 0, base};  // unreachable: the last level returns
}

// The `n` (<= kMaxCandidates) most likely non-NaN tokens, most likely first, into
// s.sorted_*; returns how many there are (fewer when the row has fewer non-NaN logits).
__device__ int select_top(const float* row, int32_t vocab, int n, Shared& s) {
  const auto wanted = static_cast<unsigned long long>(n);
  const Found boundary = radix_find(
      row, vocab, Weigher{false, 0, 1, 0}, [wanted](const Sums& sums) { return sums.count >= wanted; }, s);
  if (threadIdx.x == 0) s.n_candidates = 0;
  __syncthreads();
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) {
    const float z = row[i];
    if (is_nan(z)) continue;
    const uint64_t key = order_key(z, i);
    if (boundary.found && key > boundary.key) continue;
    const int slot = atomicAdd(&s.n_candidates, 1);
    if (slot < kMaxCandidates) {
      s.candidate_key[slot] = key;
      s.candidate_logit[slot] = z;
      s.candidate_token[slot] = i;
    }
  }
  __syncthreads();
  const int count = s.n_candidates < kMaxCandidates ? s.n_candidates : kMaxCandidates;
  const int t = static_cast<int>(threadIdx.x);
  if (t < count) {
    int rank = 0;  // keys are unique, so the ranks are a permutation
    for (int j = 0; j < count; ++j) rank += s.candidate_key[j] < s.candidate_key[t];
    s.sorted_logit[rank] = s.candidate_logit[t];
    s.sorted_token[rank] = s.candidate_token[t];
  }
  __syncthreads();
  return count;
}

// Logit bias in entry order; the first entry of each token adds up all of that token's
// entries, so that no two threads write one logit.
__device__ void apply_bias(float* row, int32_t vocab, const int32_t* tokens, const float* values, int32_t n) {
  for (int32_t j = static_cast<int32_t>(threadIdx.x); j < n; j += kThreads) {
    const int32_t token = tokens[j];
    if (token < 0 || token >= vocab) continue;
    bool first = true;
    for (int32_t k = 0; k < j && first; ++k) first = tokens[k] != token;
    if (!first) continue;
    float z = row[token];
    for (int32_t k = j; k < n; ++k) {
      if (tokens[k] == token) z = __fadd_rn(z, values[k]);
    }
    row[token] = z;
  }
}

// apply_penalties (runtime/sampler.hpp): the first occurrence of each distinct token in the
// window counts all of its occurrences and applies the penalties once. Quadratic in the
// window, which is some tens of tokens; it needs no vocabulary-sized scratch.
__device__ void apply_penalties(float* row, int32_t vocab, const int32_t* window, int32_t n, const DeviceDraw& d) {
  if (d.repetition_penalty == 1.0f && d.frequency_penalty == 0.0f && d.presence_penalty == 0.0f) return;
  for (int32_t j = static_cast<int32_t>(threadIdx.x); j < n; j += kThreads) {
    const int32_t token = window[j];
    if (token < 0 || token >= vocab) continue;
    bool first = true;
    for (int32_t k = 0; k < j && first; ++k) first = window[k] != token;
    if (!first) continue;
    int32_t count = 1;
    for (int32_t k = j + 1; k < n; ++k) count += window[k] == token;
    float z = row[token];
    z = z > 0 ? __fdiv_rn(z, d.repetition_penalty) : __fmul_rn(z, d.repetition_penalty);
    z = __fsub_rn(z, __fmul_rn(static_cast<float>(count), d.frequency_penalty));
    z = __fsub_rn(z, d.presence_penalty);
    row[token] = z;
  }
}

// The CPU's heap path over the `count` sorted candidates, by one thread, with the CPU's double
// sums in the CPU's order: the same token for the same u. -1 only if no candidate is drawn,
// which the CPU answers with the argmax.
__device__ int32_t draw_sorted(const Shared& s, int count, const DeviceDraw& d, float u) {
  if (count == 0) return -1;
  const float max = s.sorted_logit[0];
  float weights[kMaxCandidates];
  double mass = 0;
  for (int c = 0; c < count; ++c) {
    weights[c] = exp_nonpositive(__fdiv_rn(__fsub_rn(s.sorted_logit[c], max), d.temperature));
    mass = __dadd_rn(mass, weights[c]);
  }
  const auto kept_weight = [&](float w) { return w >= d.min_p ? w : 0.0f; };
  int limit = count;
  double kept_mass = 0;
  if (d.top_p < 1) {
    const double needed = __dmul_rn(d.top_p, mass);
    double walked = 0;
    limit = 0;
    while (limit < count) {
      walked = __dadd_rn(walked, weights[limit]);
      kept_mass = __dadd_rn(kept_mass, kept_weight(weights[limit]));
      ++limit;
      if (walked >= needed) break;
    }
  } else {
    for (int c = 0; c < count; ++c) kept_mass = __dadd_rn(kept_mass, kept_weight(weights[c]));
  }
  const double target = __dmul_rn(u, kept_mass);
  double walked = 0;
  for (int c = 0; c < limit; ++c) {
    walked = __dadd_rn(walked, kept_weight(weights[c]));
    if (walked > target) return s.sorted_token[c];
  }
  return -1;
}

// Top-k over the whole row (k > kFastTopK or none), top-p and min-p by radix search. -1 only if
// the walk misses every candidate, which the fixed-point sums rule out.
__device__ int32_t draw_searched(const float* row, int32_t vocab, int32_t k, float max, const DeviceDraw& d,
                                 float u, Shared& s) {
  const Weigher weigh{true, max, d.temperature, d.min_p};
  // k == vocab asks for a count no prefix reaches, which leaves the totals after one pass.
  const auto k_count = static_cast<unsigned long long>(k < vocab ? k : vocab + 1);
  const Sums top = radix_find(row, vocab, weigh, [k_count](const Sums& x) { return x.count >= k_count; }, s).through;
  Sums kept = top;
  if (d.top_p < 1) {
    const double needed = static_cast<double>(d.top_p) * static_cast<double>(top.mass);
    const auto reached = [needed, top](const Sums& x) {
      return static_cast<double>(x.mass) >= needed || x.count >= top.count;
    };
    kept = radix_find(row, vocab, weigh, reached, s).through;
  }
  const double target = static_cast<double>(u) * static_cast<double>(kept.kept);
  const Found drawn =
      radix_find(row, vocab, weigh, [target](const Sums& x) { return static_cast<double>(x.kept) > target; }, s);
  return drawn.found ? drawn.token : -1;
}

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(float* logits, int32_t vocab, const DeviceDraw* draws, const int32_t* recent,
                       const int32_t* bias_tokens, const float* bias_values, const uint64_t* masks, float* raw_rows,
                       DeviceSample* out) {
  __shared__ Shared s;
  const auto r = static_cast<size_t>(blockIdx.x);
  float* const row = logits + r * static_cast<size_t>(vocab);
  const DeviceDraw d = draws[r];
  DeviceSample& result = out[r];

  // Logprobs of the raw row; `raw` keeps it for the sampled token's logprob at the end.
  const bool want_logprobs = d.logprobs != 0 || d.top_logprobs > 0 || d.score_token >= 0;
  float* const raw = want_logprobs ? raw_rows + r * static_cast<size_t>(vocab) : nullptr;
  double log_norm = 0;
  int n_top = 0;
  if (want_logprobs) {
    const float raw_max = row_max(row, vocab, raw, s);
    log_norm = static_cast<double>(raw_max) + log(row_exp_sum(row, vocab, raw_max, s));
    const int asked = d.top_logprobs < kMaxTopLogprobs ? d.top_logprobs : kMaxTopLogprobs;
    n_top = asked > 0 ? select_top(row, vocab, asked < vocab ? asked : vocab, s) : 0;
  }
  if (threadIdx.x == 0) {
    for (int j = 0; j < kMaxTopLogprobs; ++j) {
      result.top_tokens[j] = j < n_top ? s.sorted_token[j] : -1;
      result.top_logprobs[j] =
          j < n_top ? static_cast<float>(static_cast<double>(s.sorted_logit[j]) - log_norm) : 0.0f;
    }
  }
  __syncthreads();  // s.sorted_* is read before the draw reuses it

  if (d.score_token >= 0) {
    if (threadIdx.x == 0) s.above = 0;
    __syncthreads();
    const float z = raw[d.score_token];
    int32_t above = 0;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads) above += raw[i] > z;
    atomicAdd(&s.above, above);
    __syncthreads();
    if (threadIdx.x == 0) {
      result.token = d.score_token;
      result.logprob = static_cast<float>(static_cast<double>(z) - log_norm);
      result.rank = s.above + 1;
    }
    return;
  }

  if (d.mask_offset >= 0) {
    const uint64_t* mask = masks + d.mask_offset;
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads)
      if (!((mask[i >> 6] >> (i & 63)) & 1)) row[i] = -INFINITY;
    __syncthreads();
  }
  if (d.bias_count > 0) {
    apply_bias(row, vocab, bias_tokens + d.bias_offset, bias_values + d.bias_offset, d.bias_count);
    __syncthreads();
  }
  if (d.recent_count > 0) {
    apply_penalties(row, vocab, recent + d.recent_offset, d.recent_count, d);
    __syncthreads();
  }

  const float u = philox_uniform(d.seed, d.step);
  const float max = row_max(row, vocab, nullptr, s);
  // Like the CPU, a row without a finite maximum (all NaN or -inf, or holding a +inf, next to
  // which no weight is finite) is answered greedily.
  const bool greedy = d.temperature == 0.0f || d.top_k == 1 || !isfinite(max);
  int32_t token = -1;
  if (!greedy) {
    const int32_t k = d.top_k > 0 && d.top_k < vocab ? d.top_k : vocab;
    if (k <= kFastTopK) {
      const int count = select_top(row, vocab, k, s);
      if (threadIdx.x == 0) s.token = draw_sorted(s, count, d, u);
      __syncthreads();
      token = s.token;
      __syncthreads();
    } else {
      token = draw_searched(row, vocab, k, max, d, u, s);
    }
  }
  if (token < 0) token = row_argmax(row, vocab, s);

  if (threadIdx.x == 0) {
    result.token = token;
    result.rank = 0;
    result.logprob = want_logprobs ? static_cast<float>(static_cast<double>(raw[token]) - log_norm) : 0.0f;
  }
}

__global__ void sampling_weights_kernel(const float* x, float* out, int32_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = exp_nonpositive(x[i]);
}

__global__ void philox_uniforms_kernel(uint64_t seed, const uint64_t* steps, float* out, int32_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = philox_uniform(seed, steps[i]);
}

void check_shape(const char* what, int32_t rows, int32_t vocab) {
  if (rows < 0) throw std::invalid_argument(std::string(what) + ": rows must be >= 0, got " + std::to_string(rows));
  if (vocab <= 0 || vocab > kMaxSamplingVocab) {
    throw std::invalid_argument(std::string(what) + ": vocab must be in [1, " + std::to_string(kMaxSamplingVocab) +
                                "], got " + std::to_string(vocab));
  }
}

unsigned blocks_for(int32_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

size_t sampling_workspace_bytes(int32_t rows, int32_t vocab) {
  check_shape("sampling_workspace_bytes", rows, vocab);
  return static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);  // the raw rows
}

void sample_rows(float* logits, int32_t rows, int32_t vocab, const DeviceDraw* draws, const int32_t* recent,
                 const int32_t* bias_tokens, const float* bias_values, const uint64_t* masks, void* workspace,
                 DeviceSample* out, cudaStream_t stream) {
  check_shape("sample_rows", rows, vocab);
  if (rows == 0) return;
  sample_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, vocab, draws, recent, bias_tokens, bias_values, masks, static_cast<float*>(workspace), out);
  check_launch("sample_rows");
}

void sampling_weights_on_device(const float* x, float* out, int32_t n, cudaStream_t stream) {
  if (n <= 0) return;
  sampling_weights_kernel<<<blocks_for(n), 256, 0, stream>>>(x, out, n);
  check_launch("sampling_weights_on_device");
}

void philox_uniforms_on_device(uint64_t seed, const uint64_t* steps, float* out, int32_t n, cudaStream_t stream) {
  if (n <= 0) return;
  philox_uniforms_kernel<<<blocks_for(n), 256, 0, stream>>>(seed, steps, out, n);
  check_launch("philox_uniforms_on_device");
}

}  // namespace orzo::cuda
