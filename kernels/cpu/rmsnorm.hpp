#pragma once
// RMSNorm as Llama defines it: x / sqrt(mean(x²) + eps) * weight, in f32.
#include <cmath>
#include <cstdint>

namespace orzo::cpu {

inline void rmsnorm(const float* x, const float* weight, int64_t n, double eps, float* out) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

}  // namespace orzo::cpu
