#pragma once
// out_scale * tanh(x) over an array, vectorizable: Gemma 2's soft cap of attention scores
// and of final logits, s -> cap * tanh(s / cap). Built on exp2.hpp's 2^x, with its linkage
// rules (see there).
#include <cmath>
#include <cstdint>

#include "kernels/cpu/exp2.hpp"

#if defined(ORZO_ISA_NS)
namespace orzo::cpu::ORZO_ISA_NS {
#else
namespace orzo::cpu {
#endif
namespace {  // NOLINT(cert-dcl59-cpp): see exp2.hpp

// tanh(y) = sign(y) (1 - e) / (1 + e) with e = e^(-2|y|) <= 1, so nothing overflows; a
// large |y| gives e = 0 and exactly ±out_scale. Near 0 the result is off by ~1e-7 absolute.
inline void scaled_tanh_inplace(float* x, int64_t n, float out_scale) {
  constexpr float kMinus2Log2e = -2.88539008177792681f;
  constexpr int64_t kBlock = 64;
  float e[kBlock];
  for (int64_t at = 0; at < n; at += kBlock) {
    const int64_t m = n - at < kBlock ? n - at : kBlock;
    float* v = x + at;
    for (int64_t i = 0; i < m; ++i) e[i] = kMinus2Log2e * std::fabs(v[i]);
    exp2_inplace(e, m);
    for (int64_t i = 0; i < m; ++i) v[i] = std::copysign((1.0f - e[i]) / (1.0f + e[i]), v[i]) * out_scale;
  }
}

}  // namespace
}  // namespace orzo::cpu
