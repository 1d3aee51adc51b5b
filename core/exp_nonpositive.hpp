#pragma once
// exp(x) for x <= 0 in plain float operations and fma: the sampling weight of the CPU Sampler
// (runtime/sampler.cpp) and of the CUDA sampling kernel (kernels/cuda/sampling.cu), which
// include this one definition so that both compute the same bits for the same x (where
// std::exp differs from one math library to the next). Within 8e-8 relative; x > 0 gives 1,
// x below -87 and NaN give 0. No operation here is a multiply feeding an add, so a compiler
// that contracts those into fma (nvcc does by default) changes nothing.
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define ORZO_EXP_INLINE __host__ __device__ __forceinline__
#else
// Always inlined, so that the host's loops over the vocabulary vectorize it.
#define ORZO_EXP_INLINE [[gnu::always_inline]] inline
#endif

namespace orzo {

// Its constants, named for the vector twin of the sampler's CPU loops
// (kernels/cpu/isa/sampler_rows.cpp), which must compute the same bits.
struct ExpNonpositive {
  // Below this, exp(x) leaves the normal floats; 2^n stays a normal float over the whole range.
  static constexpr float kLowest = -87.0f;
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2High = 0.693145751953125f;  // few mantissa bits: n * kLn2High is exact
  static constexpr float kLn2Low = 1.428606765330187045e-6f;
  static constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // Taylor to degree 7: the truncation error, below 6e-9 relative, hides under the rounding.
  static constexpr int kDegree = 7;
  // 1 / k!, the coefficient of r^k (each factorial up to 7! is exact in a float).
  static constexpr float inverse_factorial(int k) {
    float f = 1.0f;
    for (int i = 2; i <= k; ++i) f *= static_cast<float>(i);
    return 1.0f / f;
  }
};

ORZO_EXP_INLINE float exp_nonpositive(float x) {
  using E = ExpNonpositive;
  const float clamped = x > E::kLowest ? (x < 0.0f ? x : 0.0f) : E::kLowest;  // NaN too
  const float n = fmaf(clamped, E::kLog2e, E::kRoundingShift) - E::kRoundingShift;
  const float r = fmaf(n, -E::kLn2Low, fmaf(n, -E::kLn2High, clamped));  // |r| <= ln2 / 2
  float p = E::inverse_factorial(E::kDegree);
#ifndef __CUDACC__  // nvcc unrolls it on its own, and refuses GCC's pragma
#pragma GCC unroll 8
#endif
  for (int k = E::kDegree - 1; k >= 0; --k) p = fmaf(p, r, E::inverse_factorial(k));
  const auto exponent = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
#ifdef __CUDA_ARCH__
  const float scale = __uint_as_float(exponent);
#else
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
#endif
  return x > E::kLowest ? p * scale : 0.0f;
}

}  // namespace orzo

#undef ORZO_EXP_INLINE
