#pragma once
// 2^x over an array, in a form the compiler vectorizes: std::exp is a scalar libm call
// without -ffast-math, and softmax and SiLU take one per element. Attention folds log2(e)
// into its query scale so the exponential it needs is this one.
//
// Baseline code (swiglu.hpp) and the per-ISA attention tile (isa/) both use it, so it has
// internal linkage, and within an ISA level's compilation it lives in that level's
// namespace, as target.hpp asks of everything compiled for a level.
#include <cstdint>
#include <cstring>

#if defined(ORZO_ISA_NS)
namespace orzo::cpu::ORZO_ISA_NS {
#else
namespace orzo::cpu {
#endif
namespace {  // NOLINT(cert-dcl59-cpp): see above

namespace exp2_detail {

// Taylor coefficients of 2^f = e^(f ln 2): ln(2)^k / k!. Degree 7 on |f| <= 1/2 leaves a
// truncation error near 5e-9, below float rounding.
constexpr double kLn2 = 0.69314718055994530942;
constexpr float coefficient(int k) {
  double c = 1.0;
  for (int i = 1; i <= k; ++i) c = c * kLn2 / i;
  return static_cast<float>(c);
}

}  // namespace exp2_detail

// x[i] = 2^x[i] for n values. Inputs at or below -127, -inf included, give exactly 0, which
// softmax relies on for masked scores; 2^0 is exactly 1. Inputs must not exceed 127.
inline void exp2_inplace(float* x, int64_t n) {
  using exp2_detail::coefficient;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer (|x| < 2^22).
  constexpr float kRound = 12582912.0f;
  // A loop of its own: GCC 12 if-converts a clamp that is stored, not one used further.
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = v < -127.0f ? -127.0f : v;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float whole = (v + kRound) - kRound;
    const float f = v - whole;
    float p = coefficient(7);
    p = p * f + coefficient(6);
    p = p * f + coefficient(5);
    p = p * f + coefficient(4);
    p = p * f + coefficient(3);
    p = p * f + coefficient(2);
    p = p * f + coefficient(1);
    p = p * f + 1.0f;
    // 2^whole built from its exponent field; whole = -127 makes the field 0, i.e. +0.
    const int32_t bits = (static_cast<int32_t>(whole) + 127) * (int32_t{1} << 23);
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    x[i] = p * scale;
  }
}

}  // namespace
}  // namespace orzo::cpu
