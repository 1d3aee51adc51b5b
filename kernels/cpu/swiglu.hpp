#pragma once
// The gated FFN activation: silu(gate) * up, written over gate.
#include <cmath>
#include <cstdint>

namespace orzo::cpu {

inline void swiglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace orzo::cpu
