#pragma once
// Gemma's gated FFN activation: gelu_tanh(gate) * up, written over gate, with GELU in its
// tanh approximation, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). Since
// 0.5 (1 + tanh(z)) = 1 / (1 + e^-2z), it is SiLU's shape (swiglu.hpp) with another
// argument, and vectorizes the same way. Included as swiglu.hpp is, and for the same reason.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/exp2.hpp"

#if defined(ORZO_ISA_NS)
namespace orzo::cpu::ORZO_ISA_NS {
#else
namespace orzo::cpu {
#endif
namespace {  // NOLINT(cert-dcl59-cpp): see swiglu.hpp

// `scratch` holds n floats.
inline void geglu_tanh(float* gate, const float* up, int64_t n, float* scratch) {
  constexpr float kMinus2Log2e = -2.88539008177792681f;
  constexpr float kSqrt2OverPi = 0.797884560802865356f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float z = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    scratch[i] = std::min(kMinus2Log2e * z, 126.0f);
  }
  exp2_inplace(scratch, n);
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + scratch[i]) * up[i];
}

}  // namespace
}  // namespace orzo::cpu
