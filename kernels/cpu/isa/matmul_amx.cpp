// Weights against activations rounded to bf16, on AMX tiles (Sapphire Rapids and later):
// the arithmetic of matmul_bf16 (bf16 pairs multiplied exactly, summed in f32), at the rate
// of a matrix unit, for products of many activation rows. BF16 weights are used as stored;
// F16 weights as two bf16 terms each, exactly (decode_f16); block types are decoded to f32
// as the direct kernel decodes them and rounded to bf16, an error of 2^-9 of each weight,
// far within the block's own rounding (a 4-bit code's step is a sixteenth of the block's
// range) and the precision at which GPU engines run such files (they decode them to the
// activations' bf16 or f16 for prompts). Compiled with the
// AVX-512 level only, inside a region that also enables AMX; the avx512-amx level is that
// level's BF16 table with this kernel for the rows matmul() hands it (kernels/cpu/matmul.cpp).
//
// A tile is 16 rows of 64 bytes. TDPBF16PS C += A * B takes A as 16 rows of 32 bf16 and B
// as 16 rows of 16 bf16 pairs, pair (r, j) holding elements 2r and 2r + 1 of B's column j.
// Weights are A: 32 rows a pass, decoded and laid out as their tiles once per block of
// activation rows (pack_panel says why), or, for BF16, read where they are stored where a
// pass meets only 32 activation rows and the copy would not pay; activations are B,
// rounded and laid out in pairs once per call. C[i][j] is then weight row i against
// activation row j: y transposed, turned around in registers on the way out.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"
#include "kernels/cpu/packed_rows.hpp"

#if ORZO_SIMD_AMX
ORZO_TARGET_AMX_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see target.hpp

constexpr int64_t kTile = 16;        // rows of a tile, and weight or activation rows per tile
constexpr int64_t kDepth = 32;       // bf16 of k per tile row
constexpr int64_t kTileBytes = 1024;
// A pass is 2 x 2 tiles of C: 32 weight rows against 32 activation rows, each weight and
// activation tile loaded once per step of k for two products. Registers: C in 0-3
// (2 * weight tile + activation tile), weights in 4-5, activations in 6-7.
constexpr int64_t kPassRows = 2 * kTile;
// Activation rows whose tiles (rows * k * 2 bytes) stay in L2 while every weight row passes
// over them: three quarters of a Sapphire or Emerald Rapids core's 2 MiB (on an Emerald
// Rapids, single-threaded, 512 rows: 1.1-1.5x 768 KiB's speed, 1.3-1.7x 384 KiB's, and
// 3 or 8 MiB no faster).
constexpr int64_t kActivationBlockBytes = int64_t{1536} << 10;

// `count` elements of a thread's scratch `v`, reused across calls and never shrunk (a steady
// loop neither allocates nor clears), from a cache line's start: a tile row of 64 bytes
// that straddled two lines would cost two loads.
template <class T>
T* scratch_lines(std::vector<T>& v, int64_t count) {
  constexpr size_t kSlack = 64 / sizeof(T);
  v.resize(std::max(v.size(), static_cast<size_t>(count) + kSlack));
  const auto at = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<T*>((at + 63) & ~uintptr_t{63});
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Every tile is 16 rows of 64 bytes. The configuration is the thread's: each thread of the
// pool sets it before its share and releases the tiles after, so that a thread switch
// between calls saves no tile state. ldtilecfg is written out with the whole configuration
// as its operand: GCC 12's _tile_loadconfig names only the first 8 bytes as read, so the
// stores of the rest are dead to the optimizer, and where it drops them the first tile
// load dies of SIGILL (llama.cpp's AMX kernels, built by GCC 12, do: BENCHMARKS.md).
void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = kTile;
  }
  asm volatile("ldtilecfg %0" : : "m"(config));
}

// Activation rows [first, last) of x into B tiles: for each group of 16 rows (zero rows past
// m) and each 32 of k, a 1 KiB tile whose row r holds every activation row's pair r, group
// after group, the steps of a group contiguous.
void pack_pairs(const float* x, int64_t m, int64_t k, int64_t first, int64_t last, uint32_t* packed) {
  const int64_t steps = k / kDepth;
  const __m512i columns = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(static_cast<int>(kTile)));
  for (int64_t i = first; i < last; ++i) {
    uint32_t* group = packed + (i / kTile) * steps * (kTileBytes / 4) + i % kTile;
    if (i >= m) {
      for (int64_t s = 0; s < steps; ++s)
        _mm512_i32scatter_epi32(group + s * (kTileBytes / 4), columns, _mm512_setzero_si512(), 4);
      continue;
    }
    const float* row = x + i * k;
    for (int64_t s = 0; s < steps; ++s) {
      const __m512bh pairs = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + s * kDepth + 16), _mm512_loadu_ps(row + s * kDepth));
      _mm512_i32scatter_epi32(group + s * (kTileBytes / 4), columns, (__m512i)pairs, 4);
    }
  }
}

// y[j][i] = c[i][j] (+ bias[i]) for the `rows` activation rows and `cols` weight rows of a
// 16 x 16 block of C, through a transpose in registers.
void store_transposed(const float* c, int64_t rows, int64_t cols, float* y, int64_t ldy, const float* bias) {
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_load_ps(c + 16 * i);
  // Pairs of rows, then fours (as 64-bit units), then 128-bit lanes across eights and
  // sixteens: the textbook 16 x 16 transpose.
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    for (int h = 0; h < 2; ++h) {
      const __m512d lo = _mm512_castps_pd(t[i + h]), hi = _mm512_castps_pd(t[i + 2 + h]);
      v[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
      v[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
    }
  }
  for (int i = 0; i < 16; i += 8) {
    for (int h = 0; h < 4; ++h) {
      t[i + h] = _mm512_shuffle_f32x4(v[i + h], v[i + 4 + h], 0x88);
      t[i + 4 + h] = _mm512_shuffle_f32x4(v[i + h], v[i + 4 + h], 0xdd);
    }
  }
  for (int h = 0; h < 8; ++h) {
    v[h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0x88);
    v[8 + h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0xdd);
  }
  // v[j] is now column j of c: activation row j's outputs for the 16 weight rows.
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int j = 0; j < rows; ++j) _mm512_mask_storeu_ps(y + j * ldy, mask, _mm512_add_ps(v[j], b));
}

// A layout of a pass's weights holds, for each step of k, a pair of A tiles (the pass's two
// 16-row halves) per term: weights whose decoding is not one bf16 are a sum of two.
constexpr int64_t kTermBytes = 2 * kTileBytes;

// One stored weight row's `steps` runs of 32 weights as bf16 tile rows, step s's term t at
// dst + s * stride + t * kTermBytes.
using DecodeRow = void (*)(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride);
struct Decoder {
  DecodeRow row;
  int terms;
};

void copy_bf16(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride) {
  for (int64_t s = 0; s < steps; ++s) _mm512_store_si512(dst + s * stride, _mm512_loadu_si512(row + s * 64));
}

// A block type's sub-steps are runs of 32 weights (weight_formats.hpp), each decoded to two
// vectors of f32 and rounded to bf16 in one instruction.
template <class F>
void decode_blocks(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride) {
  static_assert(F::kVecs == 2);
  for (int64_t u = 0; u < steps / F::kSubs; ++u)
    for (int s = 0; s < F::kSubs; ++s) {
      Vec v[2];
      expand(F::codes(row + u * F::kStepBytes, s), v);
      _mm512_store_si512(dst + (u * F::kSubs + s) * stride, (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]));
    }
}

// Q4_K: each sub-block's 16 levels d * sc * q - dmin * mn (KScales), computed and rounded
// once, then looked up by code with one vpermw per 32 weights: the values expand() gives,
// at a third of the instructions.
void decode_q4_k(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride) {
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t u = 0; u < steps / 8; ++u) {
    const uint8_t* b = row + u * static_cast<int64_t>(sizeof(BlockQ4_K));
    const KScales scales = k_scales<BlockQ4_K>(b);
    for (int p = 0; p < 4; ++p) {
      const __m512i words = _mm512_cvtepu8_epi16(load256(b + offsetof(BlockQ4_K, qs) + 32 * p));
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * p + h;
        const __m256bh levels =
            _mm512_cvtneps_pbh(_mm512_fmadd_ps(codes, _mm512_set1_ps(scales.d[j]), _mm512_set1_ps(scales.m[j])));
        const __m512i index = h ? _mm512_srli_epi16(words, 4) : _mm512_and_si512(words, _mm512_set1_epi16(0x0f));
        _mm512_store_si512(dst + (8 * u + j) * stride,
                           _mm512_permutexvar_epi16(index, _mm512_zextsi256_si512((__m256i)levels)));
      }
    }
  }
}

// Q6_K: two sub-blocks' codes merged in one vector (pair_codes), their halves' scales
// unpacked once per super-block, d * (q - 32) as one FMA on the unsigned code: the values
// expand() gives, without decoding the scales again for every sub-block.
void decode_q6_k(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride) {
  for (int64_t u = 0; u < steps / 8; ++u) {
    const uint8_t* b = row + u * static_cast<int64_t>(sizeof(BlockQ6_K));
    const Q6_KFormat::Scales scales = Q6_KFormat::scales(b);
    for (int p = 0; p < 4; ++p) {
      const __m512i codes = Q6_KFormat::pair_codes(b, p);
      // 16 codes each, the halves of sub-blocks 2p and 2p + 1 in order.
      const __m128i halves[4] = {_mm512_extracti32x4_epi32(codes, 0), _mm512_extracti32x4_epi32(codes, 1),
                                 _mm512_extracti32x4_epi32(codes, 2), _mm512_extracti32x4_epi32(codes, 3)};
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * p + h;
        __m512 v[2];
        for (int g = 0; g < 2; ++g)
          v[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(halves[2 * h + g])),
                                 _mm512_set1_ps(scales.d[2 * j + g]), _mm512_set1_ps(scales.m[2 * j + g]));
        _mm512_store_si512(dst + (8 * u + j) * stride, (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]));
      }
    }
  }
}

// F16 weights exactly, as two bf16 each: hi the weight rounded, lo what remains, which has
// at most three of an f16's eleven significant bits and so is a bf16 too. Rounding F16
// weights to one bf16 would move each by up to 2^-9, four times an f16's own step.
void decode_f16(const uint8_t* row, int64_t steps, uint8_t* dst, int64_t stride) {
  for (int64_t s = 0; s < steps; ++s) {
    const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64 * s)));
    const __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64 * s + 32)));
    const __m512i hi = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
    // A bf16 is the top half of its f32.
    const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi)), 16));
    const __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi, 1)), 16));
    _mm512_store_si512(dst + s * stride, hi);
    _mm512_store_si512(dst + s * stride + kTermBytes,
                       (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(v1, h1), _mm512_sub_ps(v0, h0)));
  }
}

Decoder decoder_for(DType t) {
  switch (t) {
    case DType::BF16: return {copy_bf16, 1};
    case DType::F16: return {decode_f16, 2};
    case DType::Q8_0: return {decode_blocks<Q8_0Format>, 1};
    case DType::Q4_0: return {decode_blocks<Q4_0Format>, 1};
    case DType::Q4_1: return {decode_blocks<Q4_1Format>, 1};
    case DType::Q5_0: return {decode_blocks<Q5_0Format>, 1};
    case DType::Q5_1: return {decode_blocks<Q5_1Format>, 1};
    case DType::IQ4_NL: return {decode_blocks<IQ4_NLFormat>, 1};
    case DType::Q2_K: return {decode_blocks<Q2_KFormat>, 1};
    case DType::Q3_K: return {decode_blocks<Q3_KFormat>, 1};
    case DType::Q4_K: return {decode_q4_k, 1};
    case DType::Q5_K: return {decode_blocks<Q5_KFormat>, 1};
    case DType::Q6_K: return {decode_q6_k, 1};
    case DType::IQ4_XS: return {decode_blocks<IQ4_XSFormat>, 1};
    default: return {nullptr, 0};
  }
}

struct Job {
  const uint32_t* pairs;  // pack_pairs' tiles of every activation row, m rounded up to kPassRows
  int64_t m, k;
  const uint8_t* w;
  DType type;
  const void* packed;  // where a backend packed w's rows (packed_rows.hpp), else null
  int64_t row_bytes;  // of a stored weight row
  Decoder decode;
  int64_t n;
  float* y;
  const float* bias;
};

// The weight rows [n0, n0 + 32) of one pass as A tiles, the two of each step of k and term
// side by side (2 KiB a step and term), rows past n zero. Read where they are stored, the
// 16 rows of a tile lie a row's bytes apart, which for k a multiple of 1,024 puts them in one or two of L1's
// sets, and every step misses; laid out once per pass they are read in order.
void pack_panel(const Job& job, int64_t n0, uint8_t* panel, std::vector<uint8_t>& unpacked) {
  const int64_t steps = job.k / kDepth, rows = std::min(kPassRows, job.n - n0);
  const uint8_t* w = job.packed ? unpacked_rows(job.type, job.packed, job.k, n0, rows, unpacked) : job.w + n0 * job.row_bytes;
  const int64_t step_bytes = job.decode.terms * kTermBytes;
  for (int64_t r = 0; r < kPassRows; ++r) {
    uint8_t* dst = panel + (r / kTile) * kTileBytes + (r % kTile) * 64;
    if (r < rows) {
      job.decode.row(w + r * job.row_bytes, steps, dst, step_bytes);
      continue;
    }
    for (int64_t s = 0; s < steps; ++s)
      for (int t = 0; t < job.decode.terms; ++t)
        _mm512_store_si512(dst + s * step_bytes + t * kTermBytes, _mm512_setzero_si512());
  }
}

// Where a pass's 32 weight rows are: step s of tile t (rows 16t..16t+15) starts at
// base + t * tile_bytes + s * step_bytes, its rows `stride` apart.
struct Panel {
  const uint8_t* base;
  int64_t tile_bytes, step_bytes, stride;
};

// A pass's weights against activation rows [i0, i0 + 32) over the whole of k, into y's
// columns [n0, n0 + 32): with Terms == 2 both terms' tiles of each step, laid out
// kTermBytes apart, meet the same activation tiles.
template <int Terms>
void pass(const Job& job, const Panel& w, int64_t n0, int64_t i0, float (&c)[4][256]) {
  const int64_t steps = job.k / kDepth;
  const uint32_t* x0 = job.pairs + (i0 / kTile) * steps * (kTileBytes / 4);
  const uint32_t* x1 = x0 + steps * (kTileBytes / 4);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    const uint8_t* w0 = w.base + s * w.step_bytes;
    _tile_loadd(4, w0, w.stride);
    _tile_loadd(6, x0 + s * (kTileBytes / 4), 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, x1 + s * (kTileBytes / 4), 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, w0 + w.tile_bytes, w.stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    if constexpr (Terms == 2) {
      _tile_loadd(4, w0 + kTermBytes, w.stride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, w0 + kTermBytes + w.tile_bytes, w.stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  for (int wt = 0; wt < 2; ++wt) {
    const int64_t cols = std::min(kTile, job.n - n0 - wt * kTile);
    if (cols <= 0) break;
    for (int at = 0; at < 2; ++at) {
      const int64_t first = i0 + at * kTile, rows = std::min(kTile, job.m - first);
      if (rows <= 0) break;
      store_transposed(c[2 * wt + at], rows, cols, job.y + first * job.n + n0 + wt * kTile, job.n,
                       job.bias ? job.bias + n0 + wt * kTile : nullptr);
    }
  }
}

// Weight passes [begin, end) (32 rows each) against every activation row, a block of
// activation rows at a time so that their tiles stay in L2 while the weights pass. A pass
// of BF16 weights that meets one group of 32 activation rows reads them where they are
// stored; one that meets more lays them out first, which pays for itself from the second
// (and the last pass, if short of 32 rows, is laid out with zero rows so that no tile load
// runs past the matrix). Other types are decoded for every pass.
void run_passes(const Job& job, int64_t begin, int64_t end) {
  configure_tiles();
  alignas(64) float c[4][256];
  thread_local std::vector<uint8_t> scratch, unpacked;
  uint8_t* const panel = scratch_lines(scratch, kPassRows * job.k * 2 * job.decode.terms);
  const bool in_place = job.decode.row == copy_bf16;
  const int64_t block = std::max(kPassRows, kActivationBlockBytes / (2 * job.k) / kPassRows * kPassRows);
  for (int64_t a0 = 0; a0 < job.m; a0 += block) {
    const int64_t a1 = std::min(job.m, a0 + block);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n0 = p * kPassRows;
      Panel w{job.w + n0 * job.row_bytes, kTile * job.row_bytes, 64, job.row_bytes};
      if (!in_place || a1 - a0 > kPassRows || job.n - n0 < kPassRows) {
        pack_panel(job, n0, panel, unpacked);
        w = Panel{panel, kTileBytes, job.decode.terms * kTermBytes, 64};
      }
      for (int64_t i0 = a0; i0 < a1; i0 += kPassRows)
        (job.decode.terms == 2 ? pass<2> : pass<1>)(job, w, n0, i0, c);
    }
  }
  _tile_release();
}

}  // namespace

bool matmul_tiles_decodes(DType t) { return t != DType::BF16 && decoder_for(t).row != nullptr; }

void matmul_tiles(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  static_assert(kDepth == kBf16TileDepth);
  const Decoder decode = decoder_for(w.dtype);
  if (!decode.row)
    throw std::invalid_argument("matmul_tiles: " + w.name + " is " + dtype_name(w.dtype) + ", which the tiles do not take");
  const int64_t k = w.cols(), steps = k / kDepth;
  const int64_t padded = (m + kPassRows - 1) / kPassRows * kPassRows;
  thread_local std::vector<uint32_t> pairs;
  // The pool's threads write through this pointer: a thread_local named inside the lambda
  // would be each helper's own.
  uint32_t* const out = scratch_lines(pairs, padded / kTile * steps * (kTileBytes / 4));
  pool.parallel_for(padded / kTile, [&](int64_t begin, int64_t end, int) {
    pack_pairs(x, m, k, begin * kTile, end * kTile, out);
  });
  const Job job{out,
                m,
                k,
                static_cast<const uint8_t*>(w.data),
                w.dtype,
                w.packed,
                static_cast<int64_t>(dtype_row_bytes(w.dtype, k)),
                decode,
                w.rows(),
                y,
                bias};
  pool.parallel_for((job.n + kPassRows - 1) / kPassRows, [&](int64_t begin, int64_t end, int) { run_passes(job, begin, end); });
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_AMX_END
#endif
