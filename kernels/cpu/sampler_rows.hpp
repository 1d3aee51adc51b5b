#pragma once
// The sampler's passes over a whole vocabulary, which it makes for every token it draws or
// scores, in the active level's vector unit (kernels/cpu/isa.hpp).
#include <cstdint>

namespace orzo::cpu {

// out[i] = exp_nonpositive((x[i] - shift) / divisor) for i < n (core/exp_nonpositive.hpp),
// bit for bit: a draw's weights, the logprobs' normalizer.
void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out);

// The largest of x[0..n), NaNs passed over: -inf when there is none.
float max_row(const float* x, int64_t n);

// The first i in [begin, n) with x[i] > floor, or n when there is none (NaN never is): a
// top-k selection's next candidate, past the many logits below its least survivor.
int64_t first_above(const float* x, int64_t begin, int64_t n, float floor);

// A draw's buckets (runtime/sampler.cpp): for each i < n, `none` where x[i] is NaN, `zero`
// where w[i] is 0, and otherwise min(-((x[i] - shift) / divisor) * per_unit, deepest)
// truncated, bit for bit as those operations on floats give it. shift is at least every
// x[i] (the row's largest), so no depth is negative.
struct BucketScale {
  float shift, divisor, per_unit, deepest;
  uint16_t zero, none;
};
void bucket_rows(const float* x, const float* w, int64_t n, const BucketScale& scale, uint16_t* out);

// logits[i] = -inf for every i < n whose bit (i % 64 of word i / 64) `allowed` leaves clear:
// an output constraint's mask.
void mask_row(const uint64_t* allowed, float* logits, int64_t n);

}  // namespace orzo::cpu
