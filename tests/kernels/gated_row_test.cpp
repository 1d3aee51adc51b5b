// The gated FFN activation the backend runs (gated_row, compiled per level) against the
// baseline functions the CUDA kernels are tested against (swiglu.hpp, geglu.hpp) and against
// the definitions in double, on every level this CPU runs, large gates included.
#include "kernels/cpu/gated_row.hpp"

#include "kernels/cpu/geglu.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "tests/support/each_isa.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace orzo {
namespace {

double silu_gate(double g) { return g / (1.0 + std::exp(-g)); }
double gelu_tanh_gate(double g) {
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

TEST(GatedRow, EveryLevelAgreesWithTheBaselineAndTheDefinition) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int64_t n = 4099;  // not a multiple of any vector width
  std::vector<float> gate(n), up(n);
  for (auto& v : gate) v = normal(rng);
  for (auto& v : up) v = normal(rng);
  const float extremes[] = {100.0f, -100.0f, 88.0f, -88.0f, -87.5f, 30.0f, -30.0f, 0.0f, 10.5f, -10.5f, -1e20f, 1e-30f};
  for (size_t i = 0; i < std::size(extremes); ++i) gate[i * 11] = extremes[i];
  for (const GateActivation activation : {GateActivation::silu, GateActivation::gelu_tanh}) {
    SCOPED_TRACE(activation == GateActivation::silu ? "silu" : "gelu_tanh");
    std::vector<float> baseline = gate, scratch(n);
    activation == GateActivation::silu ? cpu::swiglu(baseline.data(), up.data(), n, scratch.data())
                                : cpu::geglu_tanh(baseline.data(), up.data(), n, scratch.data());
    testing::for_each_isa([&] {
      for (const int64_t length : {int64_t{1}, int64_t{17}, n}) {
        std::vector<float> out = gate;
        cpu::gated_row(activation, out.data(), up.data(), length, scratch.data());
        for (int64_t i = 0; i < length; ++i) {
          const double g = gate[i], want = (activation == GateActivation::silu ? silu_gate(g) : gelu_tanh_gate(g)) * up[i];
          // A level that fuses the exponent's product and sum rounds it once, not twice; deep in
          // the tail, where the gate is ~0, the exponential multiplies that difference.
          ASSERT_NEAR(out[i], baseline[i], 1e-6 * std::fabs(baseline[i]) + 1e-7 * std::fabs(up[i]))
              << "at " << i << ", gate " << g;
          ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(want) + 1e-6 * std::fabs(up[i])) << "at " << i << ", gate " << g;
        }
        if (length < n) {
          EXPECT_EQ(out[length], gate[length]);  // nothing past the row
        }
      }
    });
  }
}

}  // namespace
}  // namespace orzo
