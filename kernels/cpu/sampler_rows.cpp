#include "kernels/cpu/sampler_rows.hpp"

#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  kernels().exp_rows(x, n, shift, divisor, out);
}

void mask_row(const uint64_t* allowed, float* logits, int64_t n) { kernels().mask_row(allowed, logits, n); }

}  // namespace orzo::cpu
