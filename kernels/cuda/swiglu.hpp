#pragma once
// The gated FFN activation over the fused gate/up projection: SwiGLU, or GeGLU with the
// tanh-approximated GELU (Gemma). Twins: cpu::swiglu (kernels/cpu/swiglu.hpp) and
// cpu::geglu_tanh (kernels/cpu/geglu.hpp), then rounding to `elem`.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/gate_activation.hpp"
#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

// gate_up: [rows, 2 * inter] f32, gate in columns [0, inter), up in [inter, 2 * inter).
// out[r, i] = elem(act(gate[r, i]) * up[r, i]), act = silu or gelu_tanh; out: [rows, inter] of `elem`.
void swiglu_rows(Elem elem, GateActivation act, const float* gate_up, int32_t rows, int32_t inter, void* out,
                 cudaStream_t stream);

}  // namespace orzo::cuda
