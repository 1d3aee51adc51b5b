#pragma once
// The gated FFN's activation over one row, written over `gate`, in the active level's vector
// unit (kernels/cpu/isa.hpp): silu(gate) * up (swiglu.hpp), or gelu_tanh(gate) * up
// (geglu.hpp, Gemma). `scratch` holds n floats.
#include <cstdint>

#include "core/gate_activation.hpp"

namespace orzo::cpu {

void gated_row(GateActivation activation, float* gate, const float* up, int64_t n, float* scratch);

}  // namespace orzo::cpu
