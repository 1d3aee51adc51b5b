#include "kernels/cpu/gated_row.hpp"

#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

void gated_row(GateActivation activation, float* gate, const float* up, int64_t n, float* scratch) {
  kernels().gated_row(activation, gate, up, n, scratch);
}

}  // namespace orzo::cpu
