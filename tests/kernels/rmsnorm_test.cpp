// RMSNorm (kernels/cpu/rmsnorm.hpp), which the CPU backend and the CUDA kernel's twin test share.
#include "kernels/cpu/rmsnorm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace orzo {
namespace {

// Its squares summed in running sums, in double: within f32 rounding of the definition.
TEST(RmsNorm, MatchesTheDefinitionInDouble) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1027}}) {
    std::vector<float> x(n), w(n), out(n);
    for (auto& v : x) v = normal(rng);
    for (auto& v : w) v = normal(rng);
    cpu::rmsnorm(x.data(), w.data(), n, 1e-5, out.data());
    double sum_sq = 0;
    for (const float v : x) sum_sq += static_cast<double>(v) * v;
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const double want = static_cast<double>(w[i]) * x[i] * inv_rms;
      ASSERT_NEAR(out[i], want, 3e-7 * std::fabs(want)) << "n " << n << ", at " << i;
    }
  }
}

}  // namespace
}  // namespace orzo
