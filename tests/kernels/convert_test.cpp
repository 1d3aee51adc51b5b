#include "kernels/cpu/convert.hpp"

#include "core/quant_blocks.hpp"
#include "tests/support/each_isa.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace orzo::cpu {
namespace {

// Lengths around the 8- and 16-lane vector widths, so every SIMD loop and the scalar
// tail each handle part of some row.
const int64_t kOddLengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 40, 47, 100};

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Random f32 bit patterns biased toward the cases that round differently: subnormals,
// halfway ties of both target types, huge values and NaN.
std::vector<float> awkward_floats(int64_t n, std::mt19937& rng, bool with_nan) {
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) {
    const uint32_t r = any(rng);
    switch (r % 6) {
      case 0: f = float_of(r & 0x807fffffu); break;                     // f32 subnormal
      case 1: f = float_of((r & 0xffff0000u) | 0x8000u); break;         // bf16 tie
      case 2: f = float_of((r & 0x87ffe000u) | 0x1000u | 0x38000000u); break;  // f16-range tie
      case 3: f = float_of(r & 0xbfffffffu); break;                     // any finite-ish
      case 4: f = with_nan && (r & 0x10u) ? std::nanf("") : float_of(0x47800000u | (r & 0x807fffffu)); break;
      default: f = std::ldexp(static_cast<float>(static_cast<int32_t>(r)), -40); break;
    }
    if (!with_nan && std::isnan(f)) f = 1.0f;
  }
  return v;
}

std::vector<uint8_t> raw_halves(int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(2 * n));
  for (auto& b : v) b = static_cast<uint8_t>(byte(rng));
  return v;
}

uint16_t half_at(const std::vector<uint8_t>& bytes, int64_t i) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, sizeof h);
  return h;
}

TEST(Convert, F32IsACopy) {
  const std::vector<float> src = {1.5f, -0.0f, 3e-41f, std::numeric_limits<float>::infinity()};
  std::vector<float> stored(src.size()), back(src.size());
  quantize_row(DType::F32, src.data(), 4, stored.data());
  dequantize_row(DType::F32, stored.data(), 4, back.data());
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(bits_of(back[i]), bits_of(src[i]));
}

TEST(Convert, F16KnownValues) {
  orzo::testing::for_each_isa([&] {
    const uint8_t bytes[] = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c};
    float out[5];
    dequantize_row(DType::F16, bytes, 5, out);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 65504.0f);
    EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
    EXPECT_EQ(out[4], std::numeric_limits<float>::infinity());

    uint8_t stored[10];
    quantize_row(DType::F16, out, 5, stored);
    EXPECT_EQ(std::memcmp(stored, bytes, sizeof bytes), 0);
  });
}

TEST(Convert, BF16KnownValues) {
  orzo::testing::for_each_isa([&] {
    const uint8_t bytes[] = {0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40};
    float out[3];
    dequantize_row(DType::BF16, bytes, 3, out);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 3.140625f);

    const float ties[] = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)};
    uint8_t stored[4];
    quantize_row(DType::BF16, ties, 2, stored);
    const uint8_t rounded[] = {0x80, 0x3f, 0x82, 0x3f};  // both ties go to the even neighbour
    EXPECT_EQ(std::memcmp(stored, rounded, sizeof rounded), 0);
  });
}

TEST(Convert, F16VectorPathsMatchScalar) {
  orzo::testing::for_each_isa([&] {
    std::mt19937 rng(7);
    for (int64_t n : kOddLengths) {
      const auto halves = raw_halves(n, rng);
      std::vector<float> out(static_cast<size_t>(n));
      dequantize_row(DType::F16, halves.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const float want = f16_to_f32(half_at(halves, i));
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(out[static_cast<size_t>(i)]));
        } else {
          EXPECT_EQ(bits_of(out[static_cast<size_t>(i)]), bits_of(want)) << "n=" << n << " i=" << i;
        }
      }

      const auto floats = awkward_floats(n, rng, false);
      std::vector<uint8_t> stored(static_cast<size_t>(2 * n));
      quantize_row(DType::F16, floats.data(), n, stored.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(half_at(stored, i), f32_to_f16(floats[static_cast<size_t>(i)]))
            << "n=" << n << " i=" << i << " x=" << floats[static_cast<size_t>(i)];
    }
  });
}

TEST(Convert, BF16VectorPathsMatchScalar) {
  orzo::testing::for_each_isa([&] {
    std::mt19937 rng(11);
    for (int64_t n : kOddLengths) {
      const auto halves = raw_halves(n, rng);
      std::vector<float> out(static_cast<size_t>(n));
      dequantize_row(DType::BF16, halves.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(bits_of(out[static_cast<size_t>(i)]), bits_of(bf16_to_f32(half_at(halves, i))));

      // NaN included: the vector path must quiet it exactly as f32_to_bf16 does.
      const auto floats = awkward_floats(n, rng, true);
      std::vector<uint8_t> stored(static_cast<size_t>(2 * n));
      quantize_row(DType::BF16, floats.data(), n, stored.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(half_at(stored, i), f32_to_bf16(floats[static_cast<size_t>(i)])) << "n=" << n << " i=" << i;
    }
  });
}

TEST(Convert, HalfRoundTripsAreExactOnRepresentableValues) {
  orzo::testing::for_each_isa([&] {
    std::mt19937 rng(3);
    const int64_t n = 77;
    for (DType t : {DType::F16, DType::BF16}) {
      const auto halves = raw_halves(n, rng);
      std::vector<float> values(static_cast<size_t>(n));
      dequantize_row(t, halves.data(), n, values.data());
      for (auto& v : values)
        if (std::isnan(v)) v = 0.0f;
      std::vector<uint8_t> stored(static_cast<size_t>(2 * n));
      std::vector<float> back(static_cast<size_t>(n));
      quantize_row(t, values.data(), n, stored.data());
      dequantize_row(t, stored.data(), n, back.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(bits_of(back[static_cast<size_t>(i)]), bits_of(values[static_cast<size_t>(i)])) << dtype_name(t);
    }
  });
}

// amax = 127 makes d = 1 (f16 0x3c00), so each q is GGML's round-half-away-from-zero of x.
TEST(Convert, Q8_0BlockLayoutMatchesGgml) {
  float x[64] = {127.0f, -127.0f, 0.5f, -0.5f, 1.49f, 2.5f, -2.5f, 100.0f, -3.0f, 0.0f};
  // Second block: amax = 63.5, so d = 0.5 (f16 0x3800) and q = round(2x).
  float* y = x + 32;
  y[0] = 63.5f;
  y[1] = 1.0f;
  y[2] = -0.25f;
  y[3] = 0.2f;
  y[4] = -10.0f;
  uint8_t stored[2 * sizeof(BlockQ8_0)];
  quantize_row(DType::Q8_0, x, 64, stored);

  uint8_t want[2 * sizeof(BlockQ8_0)] = {};
  const uint8_t head0[] = {0x00, 0x3c, 0x7f, 0x81, 0x01, 0xff, 0x01, 0x03, 0xfd, 0x64, 0xfd, 0x00};
  const uint8_t head1[] = {0x00, 0x38, 0x7f, 0x02, 0xff, 0x00, 0xec};
  std::memcpy(want, head0, sizeof head0);
  std::memcpy(want + sizeof(BlockQ8_0), head1, sizeof head1);
  for (size_t i = 0; i < sizeof want; ++i) EXPECT_EQ(stored[i], want[i]) << "byte " << i;

  float back[64];
  dequantize_row(DType::Q8_0, stored, 64, back);
  const float want_back[] = {127.0f, -127.0f, 1.0f, -1.0f, 1.0f, 3.0f, -3.0f, 100.0f, -3.0f, 0.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(back[i], want_back[i]) << i;
  const float want_back1[] = {63.5f, 1.0f, -0.5f, 0.0f, -10.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back[32 + i], want_back1[i]) << i;
}

TEST(Convert, Q8_0ZeroBlockHasZeroScale) {
  const float x[32] = {};
  uint8_t stored[sizeof(BlockQ8_0)];
  std::memset(stored, 0xaa, sizeof stored);
  quantize_row(DType::Q8_0, x, 32, stored);
  for (uint8_t b : stored) EXPECT_EQ(b, 0);
}

// Block 0: the largest magnitude is -8, so d = 1 and q = min(15, trunc(x + 8.5)).
// Block 1: the largest magnitude is +16 (seen before -16, which ties), so d = -2 and
// x = -16 maps to trunc(16.5) = 16, clamped to 15.
TEST(Convert, Q4_0BlockLayoutMatchesGgml) {
  float x[64] = {};
  x[0] = -8.0f;   // q 0
  x[1] = 7.0f;    // q 15
  x[2] = 7.4f;    // q 15
  x[3] = -0.5f;   // trunc(8.0) = 8
  x[4] = -0.6f;   // trunc(7.9) = 7
  x[5] = 0.5f;    // trunc(9.0) = 9
  x[16] = 3.0f;   // q 11, high nibble of byte 0
  x[17] = -7.0f;  // q 1, high nibble of byte 1
  x[31] = 1.0f;   // q 9, high nibble of byte 15
  float* y = x + 32;
  y[0] = 16.0f;   // -8 -> q 0
  y[1] = -16.0f;  // 8 -> q 15 after clamping
  y[2] = 3.0f;    // -1.5 -> trunc(7.0) = 7
  y[16] = -5.0f;  // 2.5 -> trunc(11.0) = 11

  uint8_t stored[2 * sizeof(BlockQ4_0)];
  quantize_row(DType::Q4_0, x, 64, stored);
  // Unset elements are 0 -> q 8, so an untouched byte reads 0x88.
  const uint8_t want[2 * sizeof(BlockQ4_0)] = {
      0x00, 0x3c, 0xb0, 0x1f, 0x8f, 0x88, 0x87, 0x89, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x98,
      0x00, 0xc0, 0xb0, 0x8f, 0x87, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  for (size_t i = 0; i < sizeof want; ++i) EXPECT_EQ(stored[i], want[i]) << "byte " << i;

  float back[64];
  dequantize_row(DType::Q4_0, stored, 64, back);
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[1], 7.0f);
  EXPECT_EQ(back[3], 0.0f);
  EXPECT_EQ(back[4], -1.0f);
  EXPECT_EQ(back[16], 3.0f);
  EXPECT_EQ(back[31], 1.0f);
  EXPECT_EQ(back[32], 16.0f);
  EXPECT_EQ(back[33], -14.0f);
  EXPECT_EQ(back[34], 2.0f);
  EXPECT_EQ(back[48], -6.0f);
}

// Within one block the error is at most half a step (a whole step where Q4_0 clamps
// +8 to 7), plus what the f16 rounding of the scale adds at full range.
TEST(Convert, QuantRoundTripStaysWithinAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 32 * 40;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng) * 3.0f;
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    std::vector<uint8_t> stored(dtype_row_bytes(t, n));
    std::vector<float> back(static_cast<size_t>(n));
    quantize_row(t, x.data(), n, stored.data());
    dequantize_row(t, stored.data(), n, back.data());
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + j)]));
      const float step = t == DType::Q8_0 ? amax / 127.0f : amax / 8.0f;
      const float tol = (t == DType::Q8_0 ? 0.5f : 1.0f) * step + amax * std::ldexp(1.0f, -10);
      for (int64_t j = 0; j < 32; ++j) {
        const auto i = static_cast<size_t>(32 * b + j);
        EXPECT_NEAR(back[i], x[i], tol) << dtype_name(t) << " element " << i;
      }
    }
  }
}

TEST(Convert, QuantRowsMustBeWholeBlocks) {
  std::vector<float> x(33, 1.0f);
  std::vector<uint8_t> bytes(64);
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), 33, bytes.data()), std::invalid_argument);
  EXPECT_THROW(dequantize_row(DType::Q4_0, bytes.data(), 33, x.data()), std::invalid_argument);
}

}  // namespace
}  // namespace orzo::cpu
