// The sampler's row passes on every level this CPU runs: exp_rows bit for bit the scalar
// exp_nonpositive the CUDA sampler shares (core/exp_nonpositive.hpp), and max_row and
// bucket_rows what their scalar definitions give, so that vectorizing the sampler changes no
// draw; mask_row exactly the bits it is given.

#include "kernels/cpu/sampler_rows.hpp"

#include "core/exp_nonpositive.hpp"
#include "tests/support/each_isa.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace orzo {
namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(ExpRows, EveryLevelGivesTheScalarBits) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 30.0f);
  std::vector<float> x(4099);  // not a multiple of any vector width
  for (auto& v : x) v = normal(rng);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f,
                            -87.0f, -86.99999f, -87.00001f, 88.0f, -1e30f, 3.4e38f};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; ++i) x[i * 7] = specials[i];
  testing::for_each_isa([&] {
    for (const auto& [shift, divisor] : std::vector<std::pair<float, float>>{{0.0f, 1.0f}, {12.5f, 1.0f}, {3.0f, 0.7f},
                                                                             {-inf, 1.0f}, {40.0f, 1e-3f}}) {
      SCOPED_TRACE(::testing::Message() << "shift " << shift << " divisor " << divisor);
      for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{17}, x.size()}) {
        std::vector<float> out(x.size(), 1234.0f);
        cpu::exp_rows(x.data(), static_cast<int64_t>(n), shift, divisor, out.data());
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(bits(out[i]), bits(exp_nonpositive((x[i] - shift) / divisor))) << "x " << x[i] << " at " << i;
        for (size_t i = n; i < x.size(); ++i) ASSERT_EQ(out[i], 1234.0f) << "written past n at " << i;
      }
    }
  });
}

// Logits with every special value, at places that fall in vectors and in their tails.
std::vector<float> special_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 8.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.0f, -0.0f, -inf, nan, 1e-40f, -1e30f, nan, -inf};
  for (size_t i = 0; i < sizeof specials / sizeof *specials && i * 13 < n; ++i) x[i * 13] = specials[i];
  return x;
}

TEST(MaxRow, EveryLevelGivesTheLargestPassingOverNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = special_logits(4099, 5);
  testing::for_each_isa([&] {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{17}, size_t{100}, x.size()}) {
      float want = -inf;
      for (size_t i = 0; i < n; ++i) want = x[i] > want ? x[i] : want;
      EXPECT_EQ(cpu::max_row(x.data(), static_cast<int64_t>(n)), want) << n;
    }
    const std::vector<float> nans(37, nan);
    EXPECT_EQ(cpu::max_row(nans.data(), 37), -inf);
    EXPECT_EQ(cpu::max_row(nans.data(), 0), -inf);
    std::vector<float> last(37, -5.0f);
    last.back() = 2.0f;  // in the scalar tail of every width
    EXPECT_EQ(cpu::max_row(last.data(), 37), 2.0f);
  });
}

TEST(FirstAbove, EveryLevelFindsTheFirstStrictlyAbovePassingOverNaN) {
  const std::vector<float> x = special_logits(4099, 7);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  testing::for_each_isa([&] {
    for (const float floor : {-inf, -1.0f, 0.0f, 1.5f, 2.5f, 3.5f, inf}) {
      for (size_t begin : {size_t{0}, size_t{1}, size_t{13}, size_t{31}, size_t{4000}}) {
        for (size_t n : {begin, begin + 1, begin + 15, begin + 33, x.size()}) {
          if (n > x.size()) continue;
          size_t want = begin;
          while (want < n && !(x[want] > floor)) ++want;
          ASSERT_EQ(cpu::first_above(x.data(), static_cast<int64_t>(begin), static_cast<int64_t>(n), floor),
                    static_cast<int64_t>(want))
              << "floor " << floor << " begin " << begin << " n " << n;
        }
      }
    }
    const std::vector<float> nans(70, nan);
    EXPECT_EQ(cpu::first_above(nans.data(), 0, 70, -inf), 70);
    std::vector<float> flat(70, 1.0f);
    EXPECT_EQ(cpu::first_above(flat.data(), 0, 70, 1.0f), 70);  // equal is not above
    for (size_t at : {size_t{0}, size_t{15}, size_t{16}, size_t{31}, size_t{32}, size_t{63}, size_t{69}}) {
      std::vector<float> one(70, 1.0f);
      one[at] = 1.5f;  // in each lane of both vectors of a test, and in the scalar tail
      EXPECT_EQ(cpu::first_above(one.data(), 0, 70, 1.0f), static_cast<int64_t>(at));
      EXPECT_EQ(cpu::first_above(one.data(), static_cast<int64_t>(at) + 1, 70, 1.0f), 70);
    }
  });
}

TEST(BucketRows, EveryLevelGivesTheScalarBuckets) {
  const std::vector<float> x = special_logits(4099, 9);
  constexpr float kPerUnit = 8.0f / 0.693147180559945f, kDeepest = 1007.0f;
  constexpr uint16_t kZero = 1008, kNone = 1009;
  testing::for_each_isa([&] {
    const float max = cpu::max_row(x.data(), static_cast<int64_t>(x.size()));
    for (const auto& [shift, divisor] : std::vector<std::pair<float, float>>{{max, 1.0f}, {max, 0.3f}, {max, 40.0f}}) {
      std::vector<float> w(x.size());
      cpu::exp_rows(x.data(), static_cast<int64_t>(x.size()), shift, divisor, w.data());
      for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{17}, x.size()}) {
        SCOPED_TRACE(::testing::Message() << "shift " << shift << " divisor " << divisor << " n " << n);
        std::vector<uint16_t> out(x.size(), 4321);
        cpu::bucket_rows(x.data(), w.data(), static_cast<int64_t>(n), {shift, divisor, kPerUnit, kDeepest, kZero, kNone},
                         out.data());
        for (size_t i = 0; i < n; ++i) {
          const float depth = -((x[i] - shift) / divisor) * kPerUnit;
          const auto b = static_cast<uint16_t>(static_cast<int32_t>(depth < kDeepest ? depth : kDeepest));
          ASSERT_EQ(out[i], x[i] != x[i] ? kNone : w[i] > 0.0f ? b : kZero) << "x " << x[i] << " at " << i;
        }
        for (size_t i = n; i < x.size(); ++i) ASSERT_EQ(out[i], 4321) << "written past n at " << i;
      }
    }
  });
}

TEST(MaskRow, EveryLevelClearsExactlyTheTokensNotAllowed) {
  std::mt19937_64 rng(9);
  testing::for_each_isa([&] {
    for (const int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{100}, int64_t{151936}}) {
      std::vector<uint64_t> words((static_cast<size_t>(n) + 63) / 64);
      for (size_t w = 0; w < words.size(); ++w) words[w] = w % 5 == 0 ? ~uint64_t{0} : w % 7 == 0 ? 0 : rng();
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = static_cast<float>(i % 97) - 40.0f;
      std::vector<float> out = row;
      cpu::mask_row(words.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const bool allowed = (words[static_cast<size_t>(i) >> 6] >> (i & 63)) & 1;
        ASSERT_EQ(out[static_cast<size_t>(i)], allowed ? row[static_cast<size_t>(i)] : -std::numeric_limits<float>::infinity())
            << "n " << n << " token " << i;
      }
    }
  });
}

}  // namespace
}  // namespace orzo
