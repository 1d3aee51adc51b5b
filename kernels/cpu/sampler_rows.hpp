#pragma once
// The sampler's passes over a whole vocabulary, which it makes for every token it draws or
// scores, in the active level's vector unit (kernels/cpu/isa.hpp).
#include <cstdint>

namespace orzo::cpu {

// out[i] = exp_nonpositive((x[i] - shift) / divisor) for i < n (core/exp_nonpositive.hpp),
// bit for bit: a draw's weights, the logprobs' normalizer.
void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out);

// logits[i] = -inf for every i < n whose bit (i % 64 of word i / 64) `allowed` leaves clear:
// an output constraint's mask.
void mask_row(const uint64_t* allowed, float* logits, int64_t n);

}  // namespace orzo::cpu
