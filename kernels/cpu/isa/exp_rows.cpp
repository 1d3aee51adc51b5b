// exp_nonpositive over a row (kernels/cpu/exp_rows.hpp): the sampler's weights and the
// normalizer of its logprobs, a whole vocabulary per token. Compiled per level, so that
// exp_nonpositive's fmas are the vector unit's instead of calls into libm, with the same
// bits (an fma rounds once wherever it runs).
#include <cstdint>

#include "core/exp_nonpositive.hpp"
#include "kernels/cpu/isa/entry_points.hpp"

ORZO_TARGET_BEGIN

namespace orzo::cpu::ORZO_ISA_NS {

void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_nonpositive((x[i] - shift) / divisor);
}

}  // namespace orzo::cpu::ORZO_ISA_NS

ORZO_TARGET_END
