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

ORZO_EXP_INLINE float exp_nonpositive(float x) {
  // Below this, exp(x) leaves the normal floats; 2^n stays a normal float over the whole range.
  constexpr float kLowest = -87.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // few mantissa bits: n * kLn2High is exact
  constexpr float kLn2Low = 1.428606765330187045e-6f;
  constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float clamped = x > kLowest ? (x < 0.0f ? x : 0.0f) : kLowest;  // NaN too
  const float n = fmaf(clamped, kLog2e, kRoundingShift) - kRoundingShift;
  const float r = fmaf(n, -kLn2Low, fmaf(n, -kLn2High, clamped));  // |r| <= ln2 / 2
  // Taylor to degree 7: the truncation error, below 6e-9 relative, hides under the rounding.
  float p = 1.0f / 5040;
  p = fmaf(p, r, 1.0f / 720);
  p = fmaf(p, r, 1.0f / 120);
  p = fmaf(p, r, 1.0f / 24);
  p = fmaf(p, r, 1.0f / 6);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const auto exponent = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
#ifdef __CUDA_ARCH__
  const float scale = __uint_as_float(exponent);
#else
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
#endif
  return x > kLowest ? p * scale : 0.0f;
}

}  // namespace orzo

#undef ORZO_EXP_INLINE
