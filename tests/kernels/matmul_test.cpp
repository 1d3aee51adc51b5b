#include "kernels/cpu/matmul.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_direct.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/packed_rows.hpp"
#include "tests/support/each_isa.hpp"

namespace orzo::cpu {
namespace {

// Byte offsets of each block type's f16 scale fields (d, and m or dmin): core/quant_blocks.hpp.
std::vector<size_t> scale_fields(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {0};
  }
}

// matmul() picks a kernel by size; the kernels are also checked alone so that each one
// is covered at every m, wherever the switch-over between them lies.
using Kernel = void (*)(const float*, int64_t, const TensorView&, float*, ThreadPool&, const float*);

// A weight [n, k] stored as `t`, with the f32 values it actually holds after rounding.
struct Weight {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  TensorView view;
};

// Float types round uniform values; block types are random bytes (so every code of every
// field occurs) with scales that keep the weights near [-1, 1].
Weight make_weight(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  Weight w;
  const size_t row_bytes = dtype_row_bytes(t, k);
  w.bytes.resize(row_bytes * static_cast<size_t>(n));
  w.values.resize(static_cast<size_t>(n * k));
  if (dtype_is_quantized(t)) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
    for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
    const size_t block = dtype_block_bytes(t);
    for (size_t at = 0; at < w.bytes.size(); at += block) {
      for (size_t field : scale_fields(t)) {
        const uint16_t h = f32_to_f16(scale(rng) / static_cast<float>(dtype_block_elems(t) / 32));
        std::memcpy(w.bytes.data() + at + field, &h, sizeof h);
      }
    }
  } else {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> raw(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; ++r) {
      for (auto& v : raw) v = uniform(rng);
      quantize_row(t, raw.data(), k, w.bytes.data() + static_cast<size_t>(r) * row_bytes);
    }
  }
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(t, w.bytes.data() + static_cast<size_t>(r) * row_bytes, k, w.values.data() + r * k);
  w.view.name = "test.weight";
  w.view.dtype = t;
  w.view.shape = {n, k};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  return w;
}

std::vector<float> random_vector(int64_t size, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(size));
  for (auto& f : v) f = uniform(rng);
  return v;
}

// matmul() in each of its modes, as kernels.
void matmul_f32(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{});
}
void matmul_int8(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{true, false, false});
}
void matmul_bf16_acts(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{false, true, false});
}
// The engine's default: bf16 activations and int8 batches.
void matmul_engine(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{false, true, false, true});
}
void matmul_engine_invariant(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                             const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{false, true, true, true});
}
void matmul_invariant(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{false, false, true});
}
void matmul_bf16_invariant(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                           const float* bias) {
  matmul(x, m, w, y, pool, bias, MatmulOptions{false, true, true});
}
// The AMX tiles at any m, for the types they take, where the level has them.
void matmul_tiles_any(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  kernels().matmul_tiles(x, m, w, y, pool, bias);
}
bool tiles_take(DType t) { return kernels().matmul_tiles && kernels().tiles_from_rows(t) > 0; }
// matmul_q16_gemv on any m, at most kGemvMaxRows rows a call.
void matmul_gemv(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  for (int64_t i = 0; i < m; i += kGemvMaxRows)
    matmul_q16_gemv(x + i * w.cols(), std::min(kGemvMaxRows, m - i), w, y + i * w.rows(), pool, bias);
}
// The types whose rows pack (packed_rows.hpp).
const DType kPackedTypes[] = {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q4_1};

// w with its rows packed (packed_rows.hpp) into `storage`; packs_rows(w) must hold.
TensorView with_packed_rows(const TensorView& w, std::vector<uint8_t>& storage) {
  storage.resize(packed_rows_bytes(w));
  pack_rows(w, storage.data());
  TensorView v = w;
  v.packed = storage.data();
  return v;
}
// w packed where its rows pack and the active level reads them, as the CPU backend gives
// them; w as stored elsewhere.
TensorView packed_where_read(const TensorView& w, std::vector<uint8_t>& storage) {
  return kernels().reads_packed_rows(w.dtype) && packs_rows(w) ? with_packed_rows(w, storage) : w;
}

// matmul_gemv on packed_where_read(w).
void matmul_packed(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  std::vector<uint8_t> storage;
  matmul_gemv(x, m, packed_where_read(w, storage), y, pool, bias);
}

// matmul() on packed_where_read(w) at any m, as the CPU backend calls it: on AVX2 the words
// (matmul_packed_words), elsewhere the gemv or strips.
void matmul_packed_batch(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  std::vector<uint8_t> storage;
  matmul_f32(x, m, packed_where_read(w, storage), y, pool, bias);
}

// Whether matmul_bf16_acts hands m rows of weights of type t to the AMX tiles.
bool bf16_takes_tiles(DType t, int64_t m) {
  return tiles_take(t) && m >= kernels().tiles_from_rows(t);
}

// How many of the operands `kernel` rounds to bf16 for m rows of weights of type t: the
// activations for BF16 weights where the level has the BF16 dot product, and for the
// types the tiles decode the block types' weights too.
int bf16_operands(Kernel kernel, DType t, int64_t m) {
  const bool tiles =
      kernel == matmul_tiles_any || ((kernel == matmul_bf16_acts || kernel == matmul_engine) && bf16_takes_tiles(t, m));
  if (tiles) return t == DType::BF16 || t == DType::F16 ? 1 : 2;  // F16 as two exact bf16 terms
  return t == DType::BF16 && (kernel == matmul_bf16_acts || kernel == matmul_engine) && kernels().matmul_bf16 != nullptr
             ? 1
             : 0;
}

// Whether matmul_engine rounds m rows' activations to one int8 digit for weights of type t.
bool engine_takes_one_digit(DType t, int64_t m) {
  return matmul_q8_supports(t) && kernels().one_digit_from_rows > 0 && m >= kernels().one_digit_from_rows;
}

// The int8 digits `kernel` rounds activations to for m rows of weights of type t (0: none):
// matmul_f32 takes matmul_q16_gemv below kStripsFromRows rows and strips from there, and
// so do matmul_bf16_acts below the tiles and matmul_engine below the tiles and one digit.
int activation_digits(Kernel kernel, DType t, int64_t m) {
  if (!matmul_q8_supports(t) || bf16_operands(kernel, t, m) > 0) return 0;
  if (kernel == matmul_q8 || kernel == matmul_int8 || (kernel == matmul_engine && engine_takes_one_digit(t, m)))
    return 1;
  if (!has_matmul_q16()) return 0;
  if (kernel == matmul_q16 || kernel == matmul_gemv || kernel == matmul_packed || kernel == matmul_packed_batch ||
      kernel == matmul_invariant || kernel == matmul_f32 || kernel == matmul_bf16_acts || kernel == matmul_engine)
    return 2;
  return 0;
}

// Compares y with a double-precision product of the weight's stored values. The f32 part
// of the tolerance follows accumulation error: ~sqrt(k) roundings of terms whose typical
// magnitude is the root-sum-square of the products. Where activations are rounded to
// 8-bit blocks (matmul_q8.hpp), each x_c is off by at most half its block's step,
// amax_b / 254 (1.001 of it covers the f32 rounding of the step and of x / step), so
// the worst case adds sum_b (amax_b / 254) * sum_{c in b} |w_c|; with two digits, by at
// most a 256th of the step (1.01 of it covers the rounding of x / step, 2^-24 of up to
// 127 steps). Where they are rounded to
// bf16, each x_c is off by at most half an ulp, 2^-8 |x_c|: the worst case adds
// 2^-8 sum_c |x_c w_c|, and as much again where the weights are rounded too.
void expect_matches_reference(const std::vector<float>& x, int64_t m, const Weight& w, const float* bias,
                              const std::vector<float>& y, const std::string& what, int digits = 0,
                              int bf16 = 0) {
  const int64_t n = w.view.rows(), k = w.view.cols();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias ? bias[j] : 0.0, sq = 0.0, rounding = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const double p =
            static_cast<double>(x[static_cast<size_t>(i * k + c)]) * w.values[static_cast<size_t>(j * k + c)];
        sum += p;
        sq += p * p;
        if (bf16 > 0) rounding += bf16 * 1.01 * std::ldexp(std::fabs(p), -8);
      }
      if (digits > 0) {
        for (int64_t b = 0; b < k; b += 32) {
          double amax = 0.0, wsum = 0.0;
          for (int64_t c = b; c < b + 32; ++c) {
            amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(i * k + c)])));
            wsum += std::fabs(static_cast<double>(w.values[static_cast<size_t>(j * k + c)]));
          }
          rounding += (digits == 1 ? 1.001 * amax / 254.0 : 1.01 * amax / (127.0 * 256.0)) * wsum;
        }
      }
      const double scale = std::sqrt(sq) + (bias ? std::fabs(bias[j]) : 0.0);
      const double tol = 1e-5 * std::sqrt(static_cast<double>(k)) * std::max(scale, 1e-3) + rounding;
      ASSERT_NEAR(y[static_cast<size_t>(i * n + j)], sum, tol)
          << what << " " << dtype_name(w.view.dtype) << " m=" << m << " n=" << n << " k=" << k << " at (" << i
          << ", " << j << ")" << (bias ? " with bias" : "");
    }
  }
}

// Every type `kernel` takes, or those of `only`.
void check_shapes(Kernel kernel, ThreadPool& pool, const std::vector<int64_t>& ms,
                  const std::vector<int64_t>& ks, const std::vector<int64_t>& ns, const std::vector<DType>& only = {}) {
  std::mt19937 rng(42);
  for (DType t : kAllDTypes) {
    if (!only.empty() && std::find(only.begin(), only.end(), t) == only.end()) continue;
    if ((kernel == matmul_q8 || kernel == matmul_q16 || kernel == matmul_gemv || kernel == matmul_packed ||
         kernel == matmul_packed_batch) &&
        !matmul_q8_supports(t))
      continue;
    if (kernel == matmul_tiles_any && !tiles_take(t)) continue;
    // bf16 activations change other types' products only where the tiles take them, and
    // int8 batches only where one digit does.
    if (kernel == matmul_bf16_acts && t != DType::BF16 && !tiles_take(t)) continue;
    if (kernel == matmul_engine && t != DType::BF16 && !tiles_take(t) && !engine_takes_one_digit(t, 1 << 20)) continue;
    for (int64_t depth : ks) {
      // The depths are given in 32-weight blocks; 256-weight types take as many of theirs.
      const int64_t k = dtype_block_elems(t) > kQuantBlock ? depth / kQuantBlock * kSuperBlock : depth;
      for (int64_t n : ns) {
        const Weight w = make_weight(t, n, k, rng);
        const auto bias = random_vector(n, rng);
        for (int64_t m : ms) {
          const auto x = random_vector(m * k, rng);
          for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
            std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
            kernel(x.data(), m, w.view, y.data(), pool, b);
            expect_matches_reference(x, m, w, b, y, "pool of " + std::to_string(pool.size()),
                                     activation_digits(kernel, t, m), bf16_operands(kernel, t, m));
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

const std::vector<int64_t> kRows = {1, 2, 3, 5, 8, 17, 64, 130};
const std::vector<int64_t> kSmallDepths = {32, 64, 96};
const std::vector<int64_t> kOddOutputs = {1, 3, 37, 257};

TEST(Matmul, MatchesReferenceSingleThread) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(1);
    check_shapes(matmul_f32, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_int8, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_bf16_acts, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_engine, pool, kRows, kSmallDepths, kOddOutputs);
  });
}

TEST(Matmul, MatchesReferenceThreeThreads) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(3);
    check_shapes(matmul_f32, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_int8, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_bf16_acts, pool, kRows, kSmallDepths, kOddOutputs);
  });
}

// m = 600 at k = 2048 is past the switch-over to sgemm. One test a rounding of the
// activations, so that under the sanitizers each stays well inside ctest's timeout (the
// three together took 439 of its 600 s on a 2-core Zen 5).
void check_model_depth(Kernel kernel, const std::vector<DType>& only = {}) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(3);
    check_shapes(kernel, pool, {1, 4, 17, 600}, {2048}, {37}, only);
  });
}
TEST(Matmul, MatchesReferenceAtModelDepth) { check_model_depth(matmul_f32); }
TEST(Matmul, Int8MatchesReferenceAtModelDepth) { check_model_depth(matmul_int8); }
// The block types' tiles at depth: TilesMatchReference.
TEST(Matmul, Bf16ActivationsMatchReferenceAtModelDepth) { check_model_depth(matmul_bf16_acts, {DType::BF16}); }

// Without AMX tiles, int8 batches take block types' products to one int8 digit from the
// level's one_digit_from_rows, bit for bit the int8 path, and fewer rows (or
// batch_invariant) keep two digits, bit for bit the default's.
TEST(Matmul, Int8BatchesTakeOneDigitWithoutTiles) {
  bool ran = false;
  orzo::testing::for_each_isa([&] {
    const int64_t from = kernels().one_digit_from_rows;
    if (from == 0) return;  // the tiles take the batches, or the level has no integer path
    ran = true;
    ThreadPool pool(2);
    std::mt19937 rng(23);
    const int64_t n = 48, k = 512;
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}) {
      const Weight w = make_weight(t, n, k, rng);
      std::vector<uint8_t> storage;
      for (const TensorView& view : {w.view, packed_where_read(w.view, storage)}) {
        for (int64_t m : {from - 1, from, from + 7}) {
          const auto x = random_vector(m * k, rng);
          std::vector<float> reduced(static_cast<size_t>(m * n)), invariant(reduced.size()), expected(reduced.size());
          matmul_engine(x.data(), m, view, reduced.data(), pool, nullptr);
          matmul_engine_invariant(x.data(), m, view, invariant.data(), pool, nullptr);
          (m >= from ? matmul_int8 : matmul_f32)(x.data(), m, view, expected.data(), pool, nullptr);
          EXPECT_EQ(reduced, expected) << dtype_name(t) << " m=" << m << (view.packed ? " packed" : "");
          std::vector<float> two_digits(reduced.size());
          matmul_invariant(x.data(), m, view, two_digits.data(), pool, nullptr);
          EXPECT_EQ(invariant, two_digits) << dtype_name(t) << " m=" << m << (view.packed ? " packed" : "");
        }
      }
    }
  });
  if (!ran) GTEST_SKIP() << "every ISA level here takes batches on AMX tiles or has no integer path";
}

// The tiles alone at every m, padded passes and rows included: BF16 as stored, the block
// types decoded (kernels/cpu/isa/matmul_amx.cpp).
TEST(Matmul, TilesMatchReference) {
  orzo::testing::for_each_isa([&] {
    if (!kernels().matmul_tiles) return;  // this level has no AMX
    ThreadPool pool(3);
    check_shapes(matmul_tiles_any, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_tiles_any, pool, {33}, {2048}, {48});
  });
}

TEST(Matmul, DirectKernelMatchesReference) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(3);
    check_shapes(matmul_direct, pool, kRows, kSmallDepths, kOddOutputs);
  });
}

TEST(Matmul, Q8KernelMatchesReference) {
  orzo::testing::for_each_isa([&] {
    if (!matmul_q8_supports(DType::Q8_0)) return;  // this level has no integer path
    ThreadPool pool(3);
    check_shapes(matmul_q8, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_q8, pool, {1, 5, 130}, {2816}, {21});
    if (!has_matmul_q16()) return;
    check_shapes(matmul_q16, pool, kRows, kSmallDepths, kOddOutputs);
    check_shapes(matmul_q16, pool, {1, 5, 130}, {2816}, {21});
    check_shapes(matmul_gemv, pool, {1, 2, 3, 4}, kSmallDepths, kOddOutputs);
    check_shapes(matmul_gemv, pool, {1, 2, 3}, {2816}, {21, 64});
    check_shapes(matmul_packed, pool, {1, 2, 3}, kSmallDepths, {16, 48, 256});
    check_shapes(matmul_packed, pool, {1, 2}, {2816}, {32});
    check_shapes(matmul_packed_batch, pool, {3, 4, 5, 9, 130}, kSmallDepths, {16, 48}, {std::begin(kPackedTypes), std::end(kPackedTypes)});
    check_shapes(matmul_packed_batch, pool, {3, 7, 67}, {2816}, {32}, {std::begin(kPackedTypes), std::end(kPackedTypes)});
  });
}

// The worst-case bound above is linear in k; the typical error is a sum of independent
// roundings, uniform in half a step either way (of amax_b / 127, or of its 256th with two
// digits), so over many outputs its RMS must be sqrt(sum_c w_c^2 step_b^2 / 12). A path
// that rounded coarser (or not at all, or with a bias) would land outside [0.8, 1.25] of it.
TEST(Matmul, Q8ErrorIsThatOfRoundingActivations) {
  orzo::testing::for_each_isa([&] {
    if (!matmul_q8_supports(DType::Q8_0)) return;  // this level has no integer path
    ThreadPool pool(2);
    std::mt19937 rng(5);
    const int64_t m = 16, n = 64, k = 1024;
    for (DType t : kAllDTypes) {
      for (Kernel kernel : {matmul_q8, matmul_q16, matmul_gemv, matmul_packed, matmul_packed_batch}) {
        const int digits = activation_digits(kernel, t, m);
        if (digits == 0) continue;
        const Weight w = make_weight(t, n, k, rng);
        const auto x = random_vector(m * k, rng);
        std::vector<float> y(static_cast<size_t>(m * n));
        kernel(x.data(), m, w.view, y.data(), pool, nullptr);
        double err2 = 0.0, expected2 = 0.0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double ref = 0.0;
            for (int64_t b = 0; b < k; b += 32) {
              double amax = 0.0;
              for (int64_t c = b; c < b + 32; ++c) amax = std::max(amax, std::fabs(double{x[static_cast<size_t>(i * k + c)]}));
              const double step = amax / (digits == 1 ? 127.0 : 127.0 * 256.0);
              for (int64_t c = b; c < b + 32; ++c) {
                const double wc = w.values[static_cast<size_t>(j * k + c)];
                ref += double{x[static_cast<size_t>(i * k + c)]} * wc;
                expected2 += wc * wc * step * step / 12.0;
              }
            }
            const double e = y[static_cast<size_t>(i * n + j)] - ref;
            err2 += e * e;
          }
        }
        const double ratio = std::sqrt(err2 / expected2);
        const std::string what = std::string(dtype_name(t)) + (kernel == matmul_gemv           ? ", gemv"
                                                               : kernel == matmul_packed       ? ", packed gemv"
                                                               : kernel == matmul_packed_batch ? ", packed batch"
                                                                                               : ", strips");
        EXPECT_GT(ratio, 0.8) << what << ", " << digits << " digits";
        EXPECT_LT(ratio, 1.25) << what << ", " << digits << " digits";
      }
    }
  });
}

// Rows the rounding treats specially: all zeros (a block of scale 0 must give exactly the
// bias), one huge value (its block's other codes round to 0, within the bound; the other
// blocks keep their precision), and tiny values (the scale is relative, not absolute).
TEST(Matmul, Q8HandlesExtremeRows) {
  orzo::testing::for_each_isa([&] {
    if (!matmul_q8_supports(DType::Q8_0)) return;  // this level has no integer path
    ThreadPool pool(2);
    std::mt19937 rng(3);
    const int64_t k = 512;
    for (DType t : kAllDTypes) {
      for (Kernel kernel : {matmul_q8, matmul_q16, matmul_gemv, matmul_packed}) {
        const int digits = activation_digits(kernel, t, 1);
        if (digits == 0) continue;
        const int64_t n = kernel == matmul_packed ? 32 : 19;  // packed rows come in groups of 16
        const Weight w = make_weight(t, n, k, rng);
        const auto bias = random_vector(n, rng);
        std::vector<float> x(static_cast<size_t>(4 * k), 0.0f);
        const auto noise = random_vector(k, rng);
        for (int64_t c = 0; c < k; ++c) {
          x[static_cast<size_t>(k + c)] = noise[static_cast<size_t>(c)];
          x[static_cast<size_t>(2 * k + c)] = noise[static_cast<size_t>(c)];
          x[static_cast<size_t>(3 * k + c)] = 1e-30f * noise[static_cast<size_t>(c)];
        }
        x[static_cast<size_t>(k + 37)] = 1e6f;
        x[static_cast<size_t>(2 * k + 300)] = -3e30f;
        std::vector<float> y(static_cast<size_t>(4 * n));
        kernel(x.data(), 4, w.view, y.data(), pool, bias.data());
        for (int64_t j = 0; j < n; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], bias[static_cast<size_t>(j)]) << dtype_name(t);
        expect_matches_reference(x, 4, w, bias.data(), y, "extreme rows", digits);
      }
    }
  });
}

TEST(Matmul, BlasKernelMatchesReference) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(3);
    check_shapes(matmul_blas, pool, kRows, kSmallDepths, kOddOutputs);
  });
}

// OpenBLAS's pthread build starts, when it loads, a server thread for each CPU it may use
// but the caller's: OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS where set,
// else every CPU of the affinity mask. orzo's main() stops them (they spun a core for 0.1 s);
// sgemm goes on, on the calling thread.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

TEST(Matmul, StopsOpenBlasServerThreads) {
  if (!blas_thread_shutdown_) GTEST_SKIP() << "this BLAS has no thread server to stop";
  const auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator{});
  };
  int64_t wanted = 0;
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 0) {
      wanted = std::atoi(v);
      break;
    }
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int64_t cpus = CPU_COUNT(&mask);
  const int64_t servers = std::min(wanted > 0 ? wanted : cpus, cpus) - 1;

  const auto before = threads();
  stop_blas_server_threads();
  EXPECT_EQ(before - threads(), servers);
  const auto after = threads();
  stop_blas_server_threads();
  EXPECT_EQ(threads(), after);
  ThreadPool pool(2);
  check_shapes(matmul_blas, pool, kRows, kSmallDepths, kOddOutputs);
}

// OpenBLAS's fallback for a CPU it does not know is named for what suits the level orzo
// runs; a core with that level's vector width or wider is left alone, but for AVX2 kernels
// on a CPU that runs 512-bit operations at full width, and for AVX-512 kernels under the
// AVX2 level, which runs as an AVX2 machine does.
TEST(Matmul, NamesTheBlasCoreThatSuitsTheLevel) {
  for (CoreKind kind : {CoreKind::Other, CoreKind::Intel, CoreKind::Zen5}) {
    EXPECT_STREQ(blas_core_for("Prescott", Isa::Avx512Bf16, kind), "Cooperlake");
    EXPECT_STREQ(blas_core_for("Prescott", Isa::Avx512Vnni, kind), "SkylakeX");
    EXPECT_STREQ(blas_core_for("Sandybridge", Isa::Avx2, kind), "Haswell");
    EXPECT_EQ(blas_core_for("Prescott", Isa::Portable, kind), nullptr);
    for (const char* fine : {"SkylakeX", "Cooperlake", "SapphireRapids"})
      EXPECT_EQ(blas_core_for(fine, Isa::Avx512Bf16, kind), nullptr) << fine;
    for (const char* avx2 : {"Haswell", "Zen"}) EXPECT_EQ(blas_core_for(avx2, Isa::Avx2, kind), nullptr) << avx2;
    for (const char* avx512 : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
      EXPECT_STREQ(blas_core_for(avx512, Isa::Avx2, kind), "Haswell") << avx512;
      EXPECT_EQ(blas_core_for(avx512, Isa::Portable, kind), nullptr) << avx512;
    }
  }
  for (const char* avx2 : {"Haswell", "Zen"}) {
    EXPECT_EQ(blas_core_for(avx2, Isa::Avx512Bf16, CoreKind::Other), nullptr) << avx2 << " on a Zen 4";
    EXPECT_STREQ(blas_core_for(avx2, Isa::Avx512Bf16, CoreKind::Zen5), "Cooperlake") << avx2 << " on a Zen 5";
    EXPECT_STREQ(blas_core_for(avx2, Isa::Avx512Vnni, CoreKind::Intel), "SkylakeX") << avx2 << " on Intel";
  }
}

// k not a multiple of any vector width leaves a scalar tail for the unblocked types.
TEST(Matmul, HandlesDepthsOffTheVectorWidth) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(2);
    std::mt19937 rng(9);
    for (Kernel kernel : {matmul_f32, matmul_direct, matmul_blas, matmul_bf16_acts}) {
      for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        for (int64_t k : {1, 7, 13, 40, 77}) {
          const Weight w = make_weight(t, 21, k, rng);
          for (int64_t m : {1, 6, 9}) {
            const auto x = random_vector(m * k, rng);
            std::vector<float> y(static_cast<size_t>(m * 21));
            kernel(x.data(), m, w.view, y.data(), pool, nullptr);
            expect_matches_reference(x, m, w, nullptr, y, "tail", 0, bf16_operands(kernel, t, m));
          }
        }
      }
    }
  });
}

// A token's output must not depend on how many other tokens share the call: bit for bit
// on the integer and bf16 paths, which matmul() takes at every m when asked to; beyond float
// rounding where the batch size picks between the f32 kernels.
// On AVX2 the gemv walks the panel's groups in the panel's order, so matmul() gives the
// same bits on either side of kStripsFromRows there (DESIGN.md, matmul_q16_gemv).
TEST(Matmul, Avx2GemvMatchesItsPanelBitForBit) {
  const std::vector<Isa> levels = runnable_isas();
  if (std::find(levels.begin(), levels.end(), Isa::Avx2) == levels.end()) GTEST_SKIP() << "this CPU or build has no AVX2 level";
  const Isa before = kernels().isa;
  use_isa(Isa::Avx2);
  ThreadPool pool(2);
  std::mt19937 rng(23);
  const int64_t m = 5, n = 40, k = 1024;
  for (DType t : kAllDTypes) {
    if (!matmul_q8_supports(t)) continue;
    const Weight w = make_weight(t, n, k, rng);
    const auto x = random_vector(m * k, rng);
    const auto bias = random_vector(n, rng);
    std::vector<float> strips(static_cast<size_t>(m * n)), gemv(static_cast<size_t>(m * n));
    matmul_q16(x.data(), m, w.view, strips.data(), pool, bias.data());
    matmul_gemv(x.data(), m, w.view, gemv.data(), pool, bias.data());
    for (size_t i = 0; i < strips.size(); ++i)
      ASSERT_EQ(strips[i], gemv[i]) << dtype_name(t) << " at row " << i / n << " column " << i % n;
  }
  use_isa(before);
}

// The strips (AVX-512) and the panel (AVX2) decode packed rows to the very codes and
// scales they decode from the rows as stored, and sgemm's rows are unpacked to the stored
// bytes, so every batch gives the same bits either way; Q4_K's gemv sums in another order,
// and the reference tests above hold it to the same bound.
TEST(Matmul, PackedRowsGiveTheBatchedKernelsTheSameBits) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(2);
    std::mt19937 rng(9);
    for (DType t : kPackedTypes) {
      if (!kernels().reads_packed_rows(t)) continue;
      const Weight w = make_weight(t, 48, 768, rng);
      ASSERT_TRUE(packs_rows(w.view));
      std::vector<uint8_t> packed;
      const TensorView v = with_packed_rows(w.view, packed);
      EXPECT_EQ(packed.size(), t == DType::Q4_K ? w.bytes.size() / 2304 * 2368 : w.bytes.size());
      EXPECT_EQ(v.row_range(16, 16).packed, nullptr) << "a part of the rows is not packed from its first";
      const auto bias = random_vector(48, rng);
      for (Kernel kernel : {matmul_q8, matmul_q16, matmul_blas, matmul_tiles_any}) {
        if (kernel == matmul_tiles_any && !tiles_take(t)) continue;
        for (int64_t m : {1, 3, 7, 40}) {
          const auto x = random_vector(m * 768, rng);
          std::vector<float> stored(static_cast<size_t>(m * 48)), from_packed(stored.size());
          kernel(x.data(), m, w.view, stored.data(), pool, bias.data());
          kernel(x.data(), m, v, from_packed.data(), pool, bias.data());
          EXPECT_EQ(stored, from_packed) << dtype_name(t)
                                         << (kernel == matmul_q8    ? ", one digit"
                                             : kernel == matmul_q16 ? ", two digits"
                                             : kernel == matmul_blas ? ", sgemm"
                                                                     : ", tiles")
                                         << ", m=" << m;
        }
      }
    }
  });
}

// A prompt's rows against packed rows get the bits the gemv gives each row alone, bias
// included, at every row count and remainder of the words' blocks (on AVX2; elsewhere the
// batch takes the strips, whose sums run in another order).
TEST(Matmul, PackedWordsGiveEachRowTheGemvBits) {
  orzo::testing::for_each_isa([&] {
    if (!kernels().matmul_packed_words) return;
    ThreadPool pool(3);
    std::mt19937 rng(12);
    for (int64_t k : {256, 2816}) {
      const Weight w = make_weight(DType::Q4_K, 48, k, rng);
      std::vector<uint8_t> packed;
      const TensorView v = with_packed_rows(w.view, packed);
      const auto bias = random_vector(48, rng);
      for (int64_t m : {3, 4, 5, 6, 7, 8, 9, 131}) {
        const auto x = random_vector(m * k, rng);
        std::vector<float> batch(static_cast<size_t>(m * 48)), alone(48);
        matmul_f32(x.data(), m, v, batch.data(), pool, bias.data());
        for (int64_t i = 0; i < m; ++i) {
          matmul_q16_gemv(x.data() + i * k, 1, v, alone.data(), pool, bias.data());
          ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + i * 48))
              << "row " << i << " of " << m << ", k=" << k;
        }
      }
    }
  });
}

// Unpacking gives back the stored bytes whatever they hold: every bit of Q4_K's 12 scale
// bytes is one of kq_scale_min's 6-bit values, and random bytes set every bit of the other
// types' blocks.
TEST(Matmul, PackedRowsUnpackToTheStoredBytes) {
  std::mt19937 rng(10);
  std::vector<DType> types(std::begin(kPackedTypes), std::end(kPackedTypes));
  types.insert(types.end(), {DType::BF16, DType::F16});
  for (DType t : types) {
    Weight w = make_weight(t, 48, 768, rng);
    if (t != DType::Q4_K)
      for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t> packed;
    with_packed_rows(w.view, packed);
    const size_t row_bytes = dtype_row_bytes(t, 768);
    std::vector<uint8_t> scratch;
    const uint8_t* all = unpacked_rows(t, packed.data(), 768, 0, 48, scratch);
    EXPECT_TRUE(std::equal(w.bytes.begin(), w.bytes.end(), all)) << dtype_name(t);
    const uint8_t* last = unpacked_rows(t, packed.data(), 768, 32, 16, scratch);
    EXPECT_TRUE(std::equal(last, last + 16 * row_bytes, w.bytes.begin() + 32 * static_cast<int64_t>(row_bytes))) << dtype_name(t);
    std::vector<uint8_t> row(row_bytes);
    for (int64_t r = 0; r < 48; ++r) {
      unpack_row(t, packed.data(), 768, r, row.data());
      ASSERT_TRUE(std::equal(row.begin(), row.end(), w.bytes.begin() + r * static_cast<int64_t>(row_bytes)))
          << dtype_name(t) << " row " << r;
    }
  }
}

// Packed F16 rows against f32 activations and packed BF16 rows against bf16 ones
// (panel_product.hpp's tiles of outputs, where the level reads them): within the
// reference's bound at every row count the tiles take (1-6 rows four groups a tile, up to
// 12 two, a last single group, blocks of rows past the L2's share at k = 2816, rows copied
// a line further apart at k = 1024 for F16 and 2048 for BF16), and each row's bits whatever
// its batch and the threads.
TEST(Matmul, PackedHalfRowsMatchReferenceAndTheirRowsAlone) {
  bool ran = false;
  orzo::testing::for_each_isa([&] {
    const MatmulOptions bf16{false, true, false};
    std::mt19937 rng(51);
    for (DType t : {DType::F16, DType::BF16})
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {80, 2816}, {272, 64}, {32, 1024}, {32, 2048}}) {
      const Weight w = make_weight(t, n, k, rng);
      const MatmulOptions options = t == DType::BF16 ? bf16 : MatmulOptions{};
      if (!reads_packed_rows(w.view, options)) continue;
      ran = true;
      std::vector<uint8_t> storage;
      const TensorView v = with_packed_rows(w.view, storage);
      const auto bias = random_vector(n, rng);
      for (int64_t m : {1, 2, 5, 6, 7, 12, 13, 25, 130}) {
        const auto x = random_vector(m * k, rng);
        for (int threads : {1, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
          matmul(x.data(), m, v, y.data(), pool, bias.data(), options);
          expect_matches_reference(x, m, w, bias.data(), y, "packed, pool of " + std::to_string(threads), 0,
                                   t == DType::BF16 ? 1 : 0);
          if (::testing::Test::HasFatalFailure()) return;
          std::vector<float> alone(static_cast<size_t>(n));
          for (int64_t i = 0; i < m; ++i) {
            matmul(x.data() + i * k, 1, v, alone.data(), pool, bias.data(), options);
            ASSERT_TRUE(std::equal(alone.begin(), alone.end(), y.begin() + i * n))
                << dtype_name(t) << " row " << i << " of " << m << ", n=" << n << ", k=" << k << ", pool of " << threads;
          }
        }
      }
    }
  });
  if (!ran) GTEST_SKIP() << "no level here reads packed F16 or BF16 rows (AVX-512 without AMX)";
}

// The gemvs on packed Q6_K, Q4_0 and Q4_1 rows are the two-digit strips' product of one
// strip, their codes made where they are used: the strips' bits, bias included, for one row
// and two.
TEST(Matmul, PackedGemvsGiveTheStripsBits) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(2);
    std::mt19937 rng(31);
    for (DType t : kPackedTypes) {
      if (t == DType::Q4_K || !kernels().reads_packed_rows(t)) continue;
      for (int64_t k : {256, 2816}) {
        const Weight w = make_weight(t, 48, k, rng);
        std::vector<uint8_t> packed;
        const TensorView v = with_packed_rows(w.view, packed);
        const auto bias = random_vector(48, rng);
        for (int64_t m : {1, 2}) {
          const auto x = random_vector(m * k, rng);
          std::vector<float> strips(static_cast<size_t>(m * 48)), gemv(strips.size());
          matmul_q16(x.data(), m, w.view, strips.data(), pool, bias.data());
          matmul_q16_gemv(x.data(), m, v, gemv.data(), pool, bias.data());
          EXPECT_EQ(strips, gemv) << dtype_name(t) << ", m=" << m << ", k=" << k;
        }
      }
    }
  });
}

// matmuls() gives each product matmul()'s bits, however its region shares the columns out:
// a layer's q, k and v of different types (Q4_K_M keeps v in Q6_K), packed where the level
// reads them, column counts off the grain, biases, under each mode, on one to three threads;
// from three rows it takes the products one by one.
TEST(Matmul, SharedRegionsGiveEachProductItsBits) {
  orzo::testing::for_each_isa([&] {
    std::mt19937 rng(41);
    const int64_t k = 512;
    const std::vector<std::vector<DType>> groups = {{DType::Q4_K, DType::Q4_K, DType::Q6_K},
                                                    {DType::F16, DType::F16},
                                                    {DType::BF16, DType::F32, DType::Q8_0},
                                                    {DType::Q4_1, DType::Q4_0, DType::IQ4_XS}};
    const MatmulOptions modes[] = {{false, true, false, true}, {}, {true, false, false, false}, {false, true, true, false}};
    for (const std::vector<DType>& types : groups) {
      std::vector<Weight> w;
      std::vector<std::vector<uint8_t>> storage(types.size());
      std::vector<TensorView> v;
      std::vector<std::vector<float>> bias;
      for (size_t i = 0; i < types.size(); ++i) {
        const int64_t n = i == 1 ? 85 : 64 * static_cast<int64_t>(i + 1);
        w.push_back(make_weight(types[i], n, k, rng));
        bias.push_back(random_vector(n, rng));
      }
      for (size_t i = 0; i < types.size(); ++i) v.push_back(packed_where_read(w[i].view, storage[i]));
      for (const MatmulOptions& options : modes)
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          for (int64_t m : {1, 2, 3}) {
            const auto x = random_vector(m * k, rng);
            std::vector<std::vector<float>> want(types.size()), got(types.size());
            for (size_t i = 0; i < types.size(); ++i) {
              want[i].assign(static_cast<size_t>(m * v[i].rows()), 0.0f);
              got[i].assign(want[i].size(), -1.0f);
              matmul(x.data(), m, v[i], want[i].data(), pool, bias[i].data(), options);
            }
            if (types.size() == 2)
              matmuls(x.data(), m, {{v[0], got[0].data(), bias[0].data()}, {v[1], got[1].data(), bias[1].data()}}, pool,
                      options);
            else
              matmuls(x.data(), m,
                      {{v[0], got[0].data(), bias[0].data()}, {v[1], got[1].data(), bias[1].data()},
                       {v[2], got[2].data(), bias[2].data()}},
                      pool, options);
            for (size_t i = 0; i < types.size(); ++i)
              EXPECT_EQ(got[i], want[i]) << dtype_name(types[i]) << ", m=" << m << ", " << threads << " threads";
          }
        }
    }
  });
}

TEST(Matmul, RowsDoNotDependOnBatchSize) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(2);
    std::mt19937 rng(17);
    const int64_t m = 17, n = 96, k = 2048;
    for (DType t : kAllDTypes) {
      const Weight w = make_weight(t, n, k, rng);
      const auto x = random_vector(m * k, rng);
      const auto bias = random_vector(n, rng);
      for (Kernel kernel : {matmul_int8, matmul_invariant, matmul_gemv}) {
        if (activation_digits(kernel, t, m) == 0) continue;  // the f32 kernels: below
        for (int64_t rows : {m, int64_t{4}, int64_t{3}}) {
          std::vector<float> batched(static_cast<size_t>(rows * n));
          kernel(x.data() + (m - rows) * k, rows, w.view, batched.data(), pool, bias.data());
          for (int64_t i = 0; i < rows; ++i) {
            std::vector<float> single(static_cast<size_t>(n));
            kernel(x.data() + (m - rows + i) * k, 1, w.view, single.data(), pool, bias.data());
            for (int64_t j = 0; j < n; ++j)
              ASSERT_EQ(single[static_cast<size_t>(j)], batched[static_cast<size_t>(i * n + j)])
                  << dtype_name(t) << ", " << activation_digits(kernel, t, rows) << " digits, row " << i << " of "
                  << rows << " column " << j;
          }
        }
      }
      // bf16 products under batch_invariant; by default many rows take AMX tiles where the
      // level has them, whose sums run in another order (held to the reference above).
      {
        std::vector<float> batched(static_cast<size_t>(m * n));
        matmul_bf16_invariant(x.data(), m, w.view, batched.data(), pool, bias.data());
        for (int64_t i = 0; i < m; ++i) {
          std::vector<float> single(static_cast<size_t>(n));
          matmul_bf16_invariant(x.data() + i * k, 1, w.view, single.data(), pool, bias.data());
          for (int64_t j = 0; j < n; ++j)
            ASSERT_EQ(single[static_cast<size_t>(j)], batched[static_cast<size_t>(i * n + j)])
                << dtype_name(t) << ", bf16 activations, row " << i << " column " << j;
        }
      }
      // The f32 kernels, which matmul() takes for m rows of block types only where it has no two
      // digits.
      const bool f32_default = activation_digits(matmul_f32, t, m) == 0;
      for (Kernel batched_kernel : {matmul_f32, matmul_direct, matmul_blas}) {
        if (batched_kernel == matmul_f32 && !f32_default) continue;
        std::vector<float> batched(static_cast<size_t>(m * n));
        batched_kernel(x.data(), m, w.view, batched.data(), pool, bias.data());
        for (int64_t i = 0; i < m; ++i) {
          std::vector<float> single(static_cast<size_t>(n));
          (f32_default ? matmul_f32 : matmul_direct)(x.data() + i * k, 1, w.view, single.data(), pool, bias.data());
          float row_max = 0.0f;
          for (int64_t j = 0; j < n; ++j) row_max = std::max(row_max, std::fabs(single[static_cast<size_t>(j)]));
          for (int64_t j = 0; j < n; ++j)
            ASSERT_NEAR(single[static_cast<size_t>(j)], batched[static_cast<size_t>(i * n + j)], 1e-5f * row_max)
                << dtype_name(t) << " row " << i << " column " << j;
        }
      }
    }
  });
}

// Past the level's crossover the f32 path hands the product to sgemm, whose blocking depends
// on m; with batch_invariant every product stays on the direct kernel, so a row of a
// 600-row prompt chunk is bit for bit the row alone. (Without it the same comparison
// differs in the last bits on every level with an sgemm crossover below 600 rows.)
TEST(Matmul, BatchInvariantModeKeepsLargeBatchesExact) {
  orzo::testing::for_each_isa([&] {
    ThreadPool pool(2);
    std::mt19937 rng(23);
    const int64_t m = 600, n = 40, k = 2048;
    const MatmulOptions invariant{false, false, true};
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_K}) {
      const Weight w = make_weight(t, n, k, rng);
      const auto x = random_vector(m * k, rng);
      std::vector<float> batched(static_cast<size_t>(m * n));
      matmul(x.data(), m, w.view, batched.data(), pool, nullptr, invariant);
      for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{299}, m - 1}) {
        std::vector<float> single(static_cast<size_t>(n));
        matmul(x.data() + i * k, 1, w.view, single.data(), pool, nullptr, invariant);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(single[static_cast<size_t>(j)], batched[static_cast<size_t>(i * n + j)])
              << dtype_name(t) << " row " << i << " column " << j;
      }
    }
  });
}

TEST(Matmul, ZeroRowsWritesNothing) {
  ThreadPool pool(2);
  std::mt19937 rng(1);
  const Weight w = make_weight(DType::F16, 8, 32, rng);
  float y = 5.0f;
  matmul(nullptr, 0, w.view, &y, pool);
  EXPECT_EQ(y, 5.0f);
}

TEST(Matmul, RejectsQuantRowsOfPartialBlocks) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(256);
  TensorView w;
  w.dtype = DType::Q8_0;
  w.shape = {2, 48};
  w.data = bytes.data();
  std::vector<float> x(48), y(2);
  EXPECT_THROW(matmul(x.data(), 1, w, y.data(), pool), std::invalid_argument);
}

}  // namespace
}  // namespace orzo::cpu
