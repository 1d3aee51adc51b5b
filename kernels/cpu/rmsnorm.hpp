#pragma once
// RMSNorm as Llama defines it: x / sqrt(mean(x²) + eps) * weight, in f32.
#include <cmath>
#include <cstdint>

namespace orzo::cpu {

inline void rmsnorm(const float* x, const float* weight, int64_t n, double eps, float* out) {
  // The squares add up in double, in eight running sums: one would wait on each addition
  // before the next. Their order moves the sum by roundings far below the f32 result's.
  constexpr int64_t kRunning = 8;
  double sums[kRunning] = {};
  int64_t i = 0;
  for (; i + kRunning <= n; i += kRunning)
    for (int64_t j = 0; j < kRunning; ++j) sums[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (; i < n; ++i) sums[0] += static_cast<double>(x[i]) * x[i];
  const double sum_sq = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

}  // namespace orzo::cpu
