#include "core/philox.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace orzo {
namespace {

struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// Random123's kat_vectors, the three "philox4x32 10" lines.
constexpr std::array<KnownAnswer, 3> kKnownAnswers{{
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}};

// constexpr, so a device build can evaluate the same function; prove it compiles as such.
static_assert(philox4x32_10(kKnownAnswers[2].counter, kKnownAnswers[2].key)[0] ==
              kKnownAnswers[2].expected[0]);

TEST(Philox, MatchesPublishedKnownAnswers) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    EXPECT_EQ(philox4x32_10(kat.counter, kat.key), kat.expected);
  }
}

TEST(Philox, UnitFloatsStayInsideTheirRanges) {
  EXPECT_EQ(unit_float_closed_open(0u), 0.0f);
  EXPECT_EQ(unit_float_closed_open(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(unit_float_closed_open(0x80000000u), 0.5f);
  EXPECT_EQ(unit_float_open_closed(0u), 0x1p-24f);
  EXPECT_EQ(unit_float_open_closed(0xffffffffu), 1.0f);
  EXPECT_EQ(unit_float_open_closed(0x7fffffffu), 0.5f);
}

TEST(Philox, UniformIsAPureFunctionOfSeedAndStep) {
  const uint64_t seed = 0x0123456789abcdefULL;
  const uint64_t step = 0x0000000500000007ULL;
  const auto word = philox4x32_10({0x00000007, 0x00000005, 0, 0}, {0x89abcdef, 0x01234567})[0];
  EXPECT_EQ(philox_uniform(seed, step), unit_float_closed_open(word));
  EXPECT_EQ(philox_uniform(seed, step), philox_uniform(seed, step));
  EXPECT_NE(philox_uniform(seed, step), philox_uniform(seed, step + 1));
  EXPECT_NE(philox_uniform(seed, step), philox_uniform(seed + 1, step));
  EXPECT_NE(philox_uniform(seed, step), philox_uniform(seed + (1ULL << 32), step));
}

TEST(Philox, UniformsFillSixteenBinsEvenly) {
  constexpr int kBins = 16;
  constexpr int kDraws = 160000;
  std::vector<int> counts(kBins, 0);
  for (uint64_t step = 0; step < kDraws; ++step) {
    const float u = philox_uniform(42, step);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++counts[static_cast<size_t>(u * kBins)];
  }
  const double expected = double{kDraws} / kBins;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 37.697);  // chi-square, 15 degrees of freedom, p = 0.001
}

}  // namespace
}  // namespace orzo
