#include "kernels/cpu/isa.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace orzo::cpu {
namespace {

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : kAllIsas) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(parse_isa("avx512"), std::nullopt);
  EXPECT_EQ(parse_isa(""), std::nullopt);
}

// Every level a build has runs where the CPU has its instructions: on x86-64 with the
// package defaults that is portable, AVX2 and AVX-512 VNNI (kernels/CMakeLists.txt).
TEST(Isa, RunsTheBestLevelThisCpuHas) {
  const auto runnable = runnable_isas();
  ASSERT_FALSE(runnable.empty());
  for (size_t i = 1; i < runnable.size(); ++i) EXPECT_LT(runnable[i - 1], runnable[i]);
  for (Isa isa : runnable) EXPECT_EQ(kernels_for(isa).isa, isa);
  const auto has = [&](Isa isa) { return std::find(runnable.begin(), runnable.end(), isa) != runnable.end(); };
  EXPECT_TRUE(has(Isa::Portable) || runnable.size() == 1);  // a -march=native build has one level
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__)
  // A package build (the baseline is below AVX2): every level this CPU has is in it.
  __builtin_cpu_init();
  EXPECT_EQ(has(Isa::Avx2), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  EXPECT_EQ(has(Isa::Avx512Vnni), __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"));
#endif
  // Unless ORZO_CPU_ISA chose one, the process runs the best (tests that switch put it back).
  const char* env = std::getenv("ORZO_CPU_ISA");
  if (!env || !*env) {
    EXPECT_EQ(kernels().isa, runnable.back());
  }
}

TEST(Isa, SwitchingLevelsChangesTheActiveTable) {
  const Isa before = kernels().isa;
  for (Isa isa : runnable_isas()) {
    use_isa(isa);
    EXPECT_EQ(kernels().isa, isa);
    EXPECT_EQ(&kernels(), &kernels_for(isa));
    EXPECT_LE(kernels().tile_lanes, kMaxTileLanes);
  }
  use_isa(before);
  EXPECT_EQ(kernels().isa, before);
}

TEST(Isa, ALevelThisCpuCannotRunIsRefusedByName) {
  const auto runnable = runnable_isas();
  for (Isa isa : kAllIsas) {
    bool runs = false;
    for (Isa r : runnable) runs |= r == isa;
    if (runs) continue;
    try {
      kernels_for(isa);
      ADD_FAILURE() << isa_name(isa) << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(isa_name(isa)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(isa_name(runnable.back())), std::string::npos) << e.what();
    }
  }
}

TEST(Isa, NamesTheCpu) { EXPECT_FALSE(cpu_model_name().empty()); }

}  // namespace
}  // namespace orzo::cpu
