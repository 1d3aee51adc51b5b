// BF16 weights against activations rounded to bf16, on AVX-512 BF16's dot product
// (MatmulOptions::bf16_activations, kernels/cpu/matmul.hpp): the rows as stored, or packed
// where the backend packed them. Compiled with the AVX-512 level only; other levels have
// no such instruction and no such kernel.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/packed_rows.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

#if ORZO_SIMD_BF16_DOT
ORZO_TARGET_BF16_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"
#include "kernels/cpu/isa/direct_product.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// Activations rounded to bf16 (round to nearest even), 32 to a register: vdpbf16ps adds
// the products of each f32 lane's two bf16 pairs to it, so a 512-bit step does twice the
// multiply-adds of an f32 FMA.
struct Bf16Activations {
  using T = uint16_t;
  static constexpr int64_t kPerVec = 2 * kLanes;
  static T from_f32(float f) { return f32_to_bf16(f); }
  static float to_f32(T v) { return bf16_to_f32(v); }
  static Vec load(const T* p) { return _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static Vec madd(Vec w, Vec x, Vec acc) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }
};

// BF16 rows as they are stored, 32 weights a step, against Bf16Activations.
struct BF16DotFormat {
  using X = Bf16Activations;
  static constexpr int64_t kStep = 2 * kLanes, kStepBytes = 2 * kStep;
  static constexpr int kSubs = 1, kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, int, Vec* out) { out[0] = _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static float element(const uint8_t* row, int64_t c) { return bf16_to_f32(load_u16(row + 2 * c)); }
};

// Packed rows (packed_rows.hpp's PackedBF16Tile), the product turned inside out: a lane of
// a vector is an output column, one of a group's 16 rows, and vdpbf16ps meets a pair of its
// weights with the same pair of an activation row broadcast to every lane. A tile of M
// activation rows by G groups keeps M * G sums in registers and loads G vectors of weights
// and M broadcasts a pair; no sum crosses lanes, so none is reduced at the end. Against
// the direct kernel on the stored rows, which loads R + M vectors for its R * M sums and
// reduces each, 32 rows of a 2-core Zen 5 ran 41-53 % of the dot product's rate there and
// about 95 % here (a loop of the two alone). Each output adds its pairs in order along k
// whatever M, G and the thread: a row's result does not depend on its batch.
struct PanelJob {
  const uint16_t* x;  // m rows of k, rounded to bf16
  int64_t m, k;
  const uint8_t* groups;  // the packed rows, a group's tiles k * 32 bytes
  size_t row_bytes;       // a row's stored bytes, by which matmuls() weighs columns
  float* y;
  int64_t n;
  const float* bias;
};

// A group's tiles stream from memory where few activation rows meet them: fetched this
// far ahead into L2 (two tiles).
constexpr int64_t kPanelAhead = 2 * sizeof(PackedBF16Tile);

// Activation rows [i0, i0 + M) against groups [g0, g0 + G), fetching into L2 what lies
// `ahead` bytes past each weight it loads.
template <int M, int G>
void panel_tile(const PanelJob& job, int64_t g0, int64_t i0, int64_t ahead) {
  const size_t group_bytes = static_cast<size_t>(job.k) * 2 * kPackedRows;
  const uint8_t* w = job.groups + static_cast<size_t>(g0) * group_bytes;
  const uint16_t* x = job.x + i0 * job.k;
  Vec acc[M][G];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[i][g] = vzero();
  for (int64_t p = 0; p < job.k / 2; ++p) {
    Vec wv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint8_t* at = w + g * group_bytes + p * 64;
      wv[g] = _mm512_castsi512_ps(_mm512_loadu_si512(at));
      __builtin_prefetch(at + ahead, 0, 2);
    }
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      uint32_t pair;
      std::memcpy(&pair, x + i * job.k + 2 * p, sizeof pair);
      const Vec xv = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(pair)));
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[i][g] = Bf16Activations::madd(wv[g], xv, acc[i][g]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const int64_t c = (g0 + g) * kPackedRows;
      const Vec out = job.bias ? vadd(acc[i][g], vload(job.bias + c)) : acc[i][g];
      _mm512_storeu_ps(job.y + (i0 + i) * job.n + c, out);
    }
}

using PanelTile = void (*)(const PanelJob&, int64_t, int64_t, int64_t);

// At most this many activation rows a tile: 12 rows by 2 groups fill 24 of the 32
// registers with sums, and 6 by 4 too, for few rows, so that a row keeps four sums in
// flight.
constexpr int kPanelRows = 12, kFewRows = 6;

template <int G, int M = 1>
constexpr void fill_tiles(PanelTile* out) {
  out[M] = panel_tile<M, G>;
  if constexpr (M < (G == 4 ? kFewRows : kPanelRows)) fill_tiles<G, M + 1>(out);
}
template <int G>
PanelTile tile_of(int64_t rows) {
  static const auto table = [] {
    std::array<PanelTile, kPanelRows + 1> t{};
    fill_tiles<G>(t.data());
    return t;
  }();
  return table[static_cast<size_t>(rows)];
}

// The activation rows that share a pass over the weights: as many as keep their bf16 in
// half of a 1 MiB L2 beside the pair of groups they meet.
constexpr int64_t kPanelXBytes = int64_t{512} << 10;

// Columns [begin, end), whole groups. Per block of activation rows, every pair of groups in
// turn meets all of the block's rows while it is in L2: a weight comes from memory once
// per block, and an activation from L2 once per pair.
void panel_range(const PanelJob& job, int64_t begin, int64_t end) {
  const int64_t first = begin / kPackedRows, last = end / kPackedRows;
  const size_t group_bytes = static_cast<size_t>(job.k) * 2 * kPackedRows;
  const int64_t block = std::max<int64_t>(kPanelRows, kPanelXBytes / (2 * job.k) / kPanelRows * kPanelRows);
  for (int64_t b0 = 0; b0 < job.m; b0 += block) {
    const int64_t b1 = std::min(job.m, b0 + block);
    int64_t g = first;
    if (b1 - b0 <= kFewRows)
      for (; g + 4 <= last; g += 4) tile_of<4>(b1 - b0)(job, g, b0, kPanelAhead);
    // The first pass over a pair fetches its own weights ahead; the later ones the next
    // pair's, which the first pass over it then finds in L2.
    const int64_t next_pair = 2 * static_cast<int64_t>(group_bytes);
    for (; g + 2 <= last; g += 2)
      for (int64_t i0 = b0; i0 < b1; i0 += kPanelRows)
        tile_of<2>(std::min<int64_t>(kPanelRows, b1 - i0))(job, g, i0, i0 == b0 || g + 4 > last ? kPanelAhead : next_pair);
    for (; g < last; ++g)
      for (int64_t i0 = b0; i0 < b1; i0 += kPanelRows) tile_of<1>(std::min<int64_t>(kPanelRows, b1 - i0))(job, g, i0, kPanelAhead);
  }
}

struct PanelSlot {
  std::vector<uint16_t> x;
  PanelJob job;
  void (*range)(const PanelJob&, int64_t, int64_t);
};

RowsJob prepare_panels(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                       int slot) {
  // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
  thread_local PanelSlot slots[kRowsJobSlots];
  PanelSlot& kept = slots[slot];
  const int64_t k = w.cols();
  kept.x.resize(std::max(kept.x.size(), static_cast<size_t>(m * k)));
  uint16_t* const rounded = kept.x.data();
  const auto round_rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i)
      f32_row_to_half(DType::BF16, x + i * k, k, reinterpret_cast<uint8_t*>(rounded + i * k));
  };
  if (m == 1)
    round_rows(0, 1, 0);
  else
    pool.parallel_for(m, round_rows);
  kept.job = {rounded, m, k, static_cast<const uint8_t*>(w.packed), dtype_row_bytes(DType::BF16, k), y, w.rows(), bias};
  kept.range = panel_range;
  // Pairs of groups, so that a thread's columns run two groups a tile.
  return rows_job(kept, 2 * kPackedRows);
}

}  // namespace

RowsJob matmul_bf16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                    int slot) {
  if (w.packed) return prepare_panels(x, m, w, y, pool, bias, slot);
  return prepare_direct<BF16DotFormat>(x, m, w, y, pool, bias, slot);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_BF16_END
#endif
