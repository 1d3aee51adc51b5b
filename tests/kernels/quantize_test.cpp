// The quantizers of kernels/cpu/quantize.cpp, through quantize_row / dequantize_row: the
// reference-rounded types byte for byte against gguf.quants, the searched ones by their
// round-trip error, and every type on the inputs that break careless encoders (zeros,
// extreme magnitudes, ramps that must use every level, re-quantizing its own output).
#include "kernels/cpu/convert.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace orzo::cpu {
namespace {

std::vector<uint8_t> quantized(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), static_cast<int64_t>(x.size()), q.data());
  return q;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const auto q = quantized(t, x);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), static_cast<int64_t>(x.size()), y.data());
  return y;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0.0, s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    s += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

std::vector<float> gaussian(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng) * scale;
  return x;
}

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string s;
  char b[3];
  for (uint8_t v : bytes) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

struct TypeCase {
  DType type;
  int levels;        // distinct codes one sub-block can take
  int sub_block;     // weights sharing one (sub-)scale
  double rms_bound;  // relative RMS round-trip error on N(0, 1) rows
  bool stable;       // re-quantizing a decoded row gives back the same bytes
};

// The bounds sit about 5% above what these quantizers measure on 256 x 512 Gaussian
// weights (seed 11): Q8_0 .0054, Q4_0 .086, Q4_1 .078, Q5_0 .043, Q5_1 .038, Q2_K .298,
// Q3_K .153, Q4_K .072, Q5_K .036, Q6_K .018, IQ4_NL .076, IQ4_XS .077. For Gaussian data
// the optimal uniform quantizer with one global step is at .34 (2 bits), .19 (3), .10 (4),
// .055 (5), .030 (6): the per-block scales are what the K-quants gain over that.
const TypeCase kCases[] = {
    {DType::Q8_0, 255, 32, 0.0057, true},  {DType::Q4_0, 16, 32, 0.090, true},  {DType::Q4_1, 16, 32, 0.082, true},
    {DType::Q5_0, 32, 32, 0.045, true},    {DType::Q5_1, 32, 32, 0.040, true},  {DType::Q2_K, 4, 16, 0.313, false},
    {DType::Q3_K, 8, 16, 0.161, false},    {DType::Q4_K, 16, 32, 0.076, true},  {DType::Q5_K, 32, 32, 0.038, false},
    {DType::Q6_K, 64, 16, 0.019, false},   {DType::IQ4_NL, 16, 32, 0.080, true}, {DType::IQ4_XS, 16, 32, 0.081, true},
};

// Bytes written by gguf 0.19.0's gguf.quants.quantize for the same 256 values: exact
// multiples of 1/16 (many land on rounding ties), then the same integers divided by 7.
TEST(Quantize, ReferenceTypesMatchGgufQuantsByteForByte) {
  std::vector<float> x;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t i = 0; i < 128; ++i)
      x.push_back(static_cast<float>((i * 7919) % 201 - 100) / (pass == 0 ? 16.0f : 7.0f));
  const std::pair<DType, const char*> want[] = {
      {DType::Q4_1,
       "a23a40c660c62c93f95fb62c83e95fb62c83e95fbc3950c51c81e84fb40b71e84fb40b71e84fb40bbc3910c6e84fb40b71e84fb40b71e84fb4"
       "0b71e8a23a30c693f960c62c93f95fb62c83e95fb62c83953f25cb60c62c93f95fb62c83e95fb62c83e95f8d3e12ca1c71e84fb40b71e84fb4"
       "0b71e84fb40b8d3eeecae84fb40b71e84fb40b71e84fb40b71e8953f12cb93f960c62c93f95fb62c83e95fb62c83"},
      {DType::Q5_0,
       "4036b4d65a6bc09d5a26f3cf8c5926f3bf8c5916e2bf70b5524a6badf70d1f7096f80e1f8097f81e2f8197f810364a29a594bf7c5816e2bf7c"
       "4805e1bf7c4805d1ae40b62da59452d91c4f73b6ea1d4083b7ea1d5084b7ea253bb4d65a6bc09d5a26f3cf8c5926f3bf8c5916e2bf37ba524a"
       "6badf70d1f7096f80e1f8097f81e2f8197f8ee3a4a29a594bf7c5816e2bf7c4805e1bf7c4805d1ae25bb2da59452d91c4f73b6ea1d4083b7ea"
       "1d5084b7ea"},
      {DType::Q5_1,
       "6b3640c6b4d65a6bc08c5926e3bf8c5916e2bf7c5815d2be8c3550c5adb596521802e18f7918f2e08f6907f1d07e68078c3510c66bada594e1"
       "8f7918f2e08f6907f1d07e6807e1d06b3630c6d25a6bad26e3c08c5926e3bf8c5916e2bf7c5815563b25cbb4d65a6bc08c5926e3bf8c5916e2"
       "bf7c5815d2be573a12caadb596521802e18f7918f2e08f6907f1d07e6807573aeeca6bada594e18f7918f2e08f6907f1d07e6807e1d0563b12"
       "cbd25a6bad26e3c08c5926e3bf8c5916e2bf7c5815"},
      {DType::Q4_0,
       "403a60c63d93fa6fc62d93f96fc62c93f95f70b9f48f17c04bf48f18c05bf48f18c05bf4103ae84ea40b71e74ea40b71d73ea40a70d740ba7d"
       "06af4ad37d06a04ad37d17a04ae37d253f60c63d93fa6fc62d93f96fc62c93f95f37bef48f17c04bf48f18c05bf48f18c05bf4ee3ee84ea40b"
       "71e74ea40b71d73ea40a70d725bf7d06af4ad37d06a04ad37d17a04ae37d"},
      {DType::Q8_0,
       "4d2a81e74cb3187ee44ab0167be247ad1379df45ab1176dc42a80e74da40a60b71d77b2946950a7fce4393077ccb40900479c93d8d0176c63a"
       "8aff73c33787fc70c035841c2af962c42d8ef760c12a8bf45dbf2789f25abc2586ef58b92284ec55b71f81ea524d2ab61c82e84db4197fe54b"
       "b1177ce348af147ae046ac1277de43aa0f75db41a70d332f81e74cb3187ee44ab0167be247ad1379df45ab1176dc42a80e74da40a60b71d743"
       "2e46950a7fce4393077ccb40900479c93d8d0176c63a8aff73c33787fc70c03584fc2ef962c42d8ef760c12a8bf45dbf2789f25abc2586ef58"
       "b92284ec55b71f81ea52332fb61c82e84db4197fe54bb1177ce348af147ae046ac1277de43aa0f75db41a70d"},
  };
  for (const auto& [type, bytes] : want) EXPECT_EQ(hex(quantized(type, x)), bytes) << dtype_name(type);
}

TEST(Quantize, GaussianRoundTripErrorIsBoundedPerType) {
  const auto x = gaussian(256 * 512, 11);
  for (const auto& c : kCases) {
    const double e = relative_rms_error(x, round_trip(c.type, x));
    EXPECT_LT(e, c.rms_bound) << dtype_name(c.type);
    // A bound far above the measurement would not notice a quantizer getting worse.
    EXPECT_GT(e, c.rms_bound * 0.85) << dtype_name(c.type) << ": tighten the bound";
  }
}

// The error is relative: scaling the weights scales the error, down to where the f16
// scales themselves run out of range.
TEST(Quantize, ErrorIsScaleInvariantAcrossMagnitudes) {
  for (float scale : {1e-3f, 1e3f}) {
    const auto x = gaussian(256 * 16, 12, scale);
    for (const auto& c : kCases)
      EXPECT_LT(relative_rms_error(x, round_trip(c.type, x)), c.rms_bound * 1.1) << dtype_name(c.type) << " x" << scale;
  }
}

TEST(Quantize, ZeroRowsDecodeToZero) {
  const std::vector<float> x(512, 0.0f);
  for (const auto& c : kCases)
    for (float v : round_trip(c.type, x)) ASSERT_EQ(v, 0.0f) << dtype_name(c.type);
}

TEST(Quantize, ExtremeMagnitudesStayFinite) {
  std::vector<std::vector<float>> rows;
  rows.push_back(gaussian(512, 13, 1e-30f));  // scales underflow f16 to zero
  auto big = gaussian(512, 14, 1e4f);
  big[3] = 6e4f;
  big[300] = -6e4f;
  rows.push_back(big);
  rows.push_back(std::vector<float>(512, 6e4f));  // constant blocks: no range to divide by
  rows.push_back(std::vector<float>(512, -3.0f));
  auto spike = std::vector<float>(512, 1e-3f);
  spike[77] = 5e4f;  // one outlier with tiny neighbours
  rows.push_back(spike);
  for (const auto& x : rows) {
    for (const auto& c : kCases) {
      const auto y = round_trip(c.type, x);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << dtype_name(c.type) << " element " << i;
        // Nothing decodes far beyond the largest input magnitude.
        ASSERT_LE(std::fabs(y[i]), 6e4f * 1.07f) << dtype_name(c.type) << " element " << i;
      }
    }
  }
  for (const auto& c : kCases) {
    EXPECT_LT(relative_rms_error(big, round_trip(c.type, big)), c.rms_bound * 1.2) << dtype_name(c.type);
    // A constant row is one code at the end of the range: close to exact.
    const auto flat = round_trip(c.type, rows[3]);
    for (float v : flat) ASSERT_NEAR(v, -3.0f, 3.0f * 0.04f) << dtype_name(c.type);
  }
}

// A ramp across each sub-block must spread over every level it can: an encoder that clamps
// one code too early, or never reaches the top one, shows up as fewer distinct values. The
// ramp stops a step short of +1, as the signed code ranges [-n, n - 1] do.
TEST(Quantize, RampsUseEveryLevel) {
  for (const auto& c : kCases) {
    std::vector<float> x(512);
    for (size_t i = 0; i < x.size(); ++i) {
      const auto j = static_cast<float>(static_cast<int>(i) % c.sub_block);
      x[i] = -1.0f + 2.0f * j / static_cast<float>(c.sub_block);
    }
    const auto y = round_trip(c.type, x);
    const size_t want = static_cast<size_t>(std::min(c.levels, c.sub_block));
    for (size_t b = 0; b < y.size(); b += static_cast<size_t>(c.sub_block)) {
      const std::set<float> distinct(y.begin() + static_cast<std::ptrdiff_t>(b),
                                     y.begin() + static_cast<std::ptrdiff_t>(b) + c.sub_block);
      ASSERT_EQ(distinct.size(), want) << dtype_name(c.type) << " sub-block at " << b;
    }
  }
}

// Decoded weights sit on the grid the encoder chose; encoding them again should find that
// grid. The reference-rounded types, Q4_K and IQ4 do, to the byte; the other searches may
// settle on a neighbouring grid, which moves the weights by far less than the first pass.
TEST(Quantize, RequantizingDecodedWeightsIsStable) {
  const auto x = gaussian(256 * 64, 15);
  for (const auto& c : kCases) {
    const auto y = round_trip(c.type, x);
    if (c.stable) {
      EXPECT_EQ(quantized(c.type, y), quantized(c.type, x)) << dtype_name(c.type);
    } else {
      EXPECT_LT(relative_rms_error(y, round_trip(c.type, y)), 0.1 * relative_rms_error(x, y)) << dtype_name(c.type);
    }
  }
}

TEST(Quantize, RowsMustBeWholeBlocks) {
  std::vector<float> x(288, 1.0f);
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), 288, bytes.data()), std::invalid_argument);
  EXPECT_THROW(quantize_row(DType::IQ4_NL, x.data(), 40, bytes.data()), std::invalid_argument);
}

}  // namespace
}  // namespace orzo::cpu
