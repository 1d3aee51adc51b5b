#include "kernels/cpu/exp_rows.hpp"

#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  kernels().exp_rows(x, n, shift, divisor, out);
}

}  // namespace orzo::cpu
