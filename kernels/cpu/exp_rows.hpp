#pragma once
// out[i] = exp_nonpositive((x[i] - shift) / divisor) for i < n (core/exp_nonpositive.hpp),
// bit for bit, in the active level's vector unit (kernels/cpu/isa.hpp): the sampler takes
// the weights of a whole vocabulary this way for every token it draws or scores.
#include <cstdint>

namespace orzo::cpu {

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out);

}  // namespace orzo::cpu
