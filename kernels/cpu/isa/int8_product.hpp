#pragma once
// What the int8 products of the block types (isa/matmul_q8.cpp) share on both levels that
// have them: which level this is (ORZO_Q8_VNNI or ORZO_Q8_AVX2, undefined again at the end
// of matmul_q8.cpp), how weight codes meet signed activations, a product's Job, and the
// activation words of the word gemvs. Include it inside the ORZO_TARGET_BEGIN region,
// after weight_formats.hpp; internal linkage, as target.hpp explains.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.hpp"
#include "core/tensor.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage, as target.hpp explains

#if ORZO_SIMD_VNNI
#define ORZO_Q8_VNNI 1
#elif ORZO_SIMD_AVX2
#define ORZO_Q8_AVX2 1
#endif

#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)

// Signed weight codes meet vpdpbusd / vpmaddubsw (unsigned x signed bytes) with the
// activations as the signed operand and the weights made unsigned by their format's kBias:
// sum (q + bias) * x = sum q * x + bias * sum x, and the second term is subtracted exactly
// in int32 from the block sums of x, kept with the activations. vpdpbusd sums in 32 bits,
// so any bias works. vpmaddubsw saturates pair sums at 2^15, which (q + 128) * 127 twice
// overflows, so on AVX2 the types whose bias is 128 (Q8_0, IQ4) take the sign trick
// instead: |q| * (x * sign(q)), at most 2 * 128 * 127 per pair.
#if defined(ORZO_Q8_VNNI)
template <class F>
constexpr bool kSignTrick = false;
#else
template <class F>
constexpr bool kSignTrick = F::kBias > 64;
#endif

// The `bytes` from `from` into cache, a line at a time, for a later read.
inline void prefetch(const uint8_t* from, int64_t bytes) {
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(from + at, 0, 2);
}

// The bias whose correction the activations carry for weights of format F.
template <class F>
constexpr int kActivationBias = kSignTrick<F> ? 0 : F::kBias;

// A format whose Scales unpack all of a super-block's d and m at once (K-quants:
// weight_formats.hpp) takes them from there for all its sub-blocks: each sub-block
// unpacking its own cost a scalar decode per block (Q4_K_M decode of one row on an
// Emerald Rapids: 68 % of the time went to decoding the weights).
template <class F, class = void>
constexpr bool kUnitScales = false;
template <class F>
constexpr bool kUnitScales<F, std::void_t<typename F::Scales>> = true;

// One product: activation rows quantized (`units` of each layout's Activation a row), and
// the weights as stored.
template <class A>
struct Job {
  const A* x;
  int64_t m, k, units;
  const uint8_t* w;
  size_t row_bytes;
  float* y;
  int64_t n;
  const float* bias;
  const void* packed;  // the same rows packed (TensorView::packed: w's type's tiles), or null
};

// A few activation rows for the word gemvs (word_tile, packed_group): each 32-weight block
// rounded to two int8 digits, as the level's other layouts round it, and each value kept
// as one 16-bit integer, 256 * q[0] + q[1] (at most 32,639 in size).
struct WordRows {
  int64_t k = 0;
  std::vector<int16_t> q;    // m rows of k codes: each block's value (round_block)
  std::vector<float> scale;  // each block's scale
  std::vector<float> sum;    // and scale * the sum of its values (the blocks' scaled sum)
  // Room for m rows of k; grown, never shrunk, so a steady loop allocates nothing.
  void resize(int64_t m, int64_t k_) {
    const size_t count = static_cast<size_t>(m * (k_ / 32));
    k = k_;
    q.resize(std::max(q.size(), static_cast<size_t>(m * k_)));
    scale.resize(std::max(scale.size(), count));
    sum.resize(std::max(sum.size(), count));
  }
};

// Words e, e + 1 of activation row i as one 32-bit lane, for a broadcast.
inline int32_t word_pair(const WordRows& x, int64_t i, int64_t e) {
  int32_t pair;
  std::memcpy(&pair, x.q.data() + i * x.k + e, sizeof pair);
  return pair;
}

// Tiles of packed rows (packed_rows.hpp) fetched this far ahead of tile u: with the
// hardware prefetchers alone a 2-thread AVX-512 gemv read 29-34 GB/s of this Zen 4's 49
// (matmul_bench q8/packed); one Q4_K tile ahead 25-31, two 40-45, four 35-40. So tiles of
// every type are fetched two Q4_K tiles' bytes ahead (Q6_K's 3,360-byte tiles two ahead,
// Q4_0's 288 seventeen). Past the last tile this names the next group's, or bytes past the
// matrix, which a prefetch may name: it never faults (an address, so that no pointer runs
// past its array).
constexpr size_t kPackedAheadBytes = 2 * sizeof(PackedQ4_KTile);
template <class Tile>
inline void prefetch_tile(const Tile* tiles, int64_t u) {
  constexpr size_t kAhead = (kPackedAheadBytes + sizeof(Tile) - 1) / sizeof(Tile) * sizeof(Tile);
  prefetch(reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(tiles + u) + kAhead), sizeof(Tile));
}
#endif

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
