#pragma once
// The gated FFN activation: silu(gate) * up = gate / (1 + e^-gate) * up, written over gate.
// Baseline code (the CUDA kernel's twin) and each ISA level (isa/gated_row.cpp, which the
// backend runs) include it, so, as exp2.hpp, it has internal linkage in either's namespace.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/exp2.hpp"

#if defined(ORZO_ISA_NS)
namespace orzo::cpu::ORZO_ISA_NS {
#else
namespace orzo::cpu {
#endif
namespace {  // NOLINT(cert-dcl59-cpp): see above

// `scratch` holds n floats. The exponential goes through exp2_inplace so the whole row
// vectorizes; e^-g = 2^(-g log2 e), clamped where 1 + e^-g is already beyond float range.
inline void swiglu(float* gate, const float* up, int64_t n, float* scratch) {
  constexpr float kLog2e = 1.44269504088896341f;
  for (int64_t i = 0; i < n; ++i) scratch[i] = std::min(-gate[i] * kLog2e, 126.0f);
  exp2_inplace(scratch, n);
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + scratch[i]) * up[i];
}

}  // namespace
}  // namespace orzo::cpu
