#include "kernels/cpu/sampler_rows.hpp"

#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  kernels().exp_rows(x, n, shift, divisor, out);
}

float max_row(const float* x, int64_t n) { return kernels().max_row(x, n); }

int64_t first_above(const float* x, int64_t begin, int64_t n, float floor) {
  return kernels().first_above(x, begin, n, floor);
}

void bucket_rows(const float* x, const float* w, int64_t n, const BucketScale& scale, uint16_t* out) {
  kernels().bucket_rows(x, w, n, scale, out);
}

void mask_row(const uint64_t* allowed, float* logits, int64_t n) { kernels().mask_row(allowed, logits, n); }

}  // namespace orzo::cpu
