// The gated FFN's activation compiled per level: over a prompt's rows it is a pass over rows
// x the FFN's width, which the baseline's four-lane SSE2 took 2.4 % of a 512-token F16 prefill
// for (Zen 5). The same functions as the baseline's (swiglu.hpp, geglu.hpp), so the results
// differ from them only where a level fuses a product and a sum into one rounding.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa/entry_points.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/exp2.hpp"
#include "kernels/cpu/geglu.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace orzo::cpu::ORZO_ISA_NS {

void gated_row(GateActivation activation, float* gate, const float* up, int64_t n, float* scratch) {
  if (activation == GateActivation::gelu_tanh)
    geglu_tanh(gate, up, n, scratch);
  else
    swiglu(gate, up, n, scratch);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
