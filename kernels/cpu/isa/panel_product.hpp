#pragma once
// Packed rows of a 16-bit float type (packed_rows.hpp: 16 rows side by side) multiplied
// inside out, for AVX-512 and AVX2: a lane of a vector is an output column, one of a
// group's 16 rows (AVX2 takes a group's step in two vectors), and a step of a row's weights
// meets the same activations broadcast to every lane. A tile of M activation rows by G
// groups keeps M * G groups' worth of sums in registers and loads the groups' weight
// vectors and M broadcasts a step; no sum crosses lanes, so none is reduced at the end.
// The direct kernel on the rows as stored (direct_product.hpp) loads R + M vectors for its
// R * M sums and reduces each: on a Zen 5 it ran BF16 products at 41-63 % of the dot
// product's rate whatever m, this one at 84-89 % from 128 rows (BENCHMARKS.md). Each
// output adds its steps in order along k whatever M, G and the thread, so a row's result
// does not depend on its batch.
//
// prepare_panels<P> prepares a product for a format P of the packed tiles:
//   X                      the activations as the kernel reads them;
//   kStepWeights           a row's weights a lane takes a step (a bf16 pair, or one);
//   kRounds                whether x is rounded into a copy (round_row, only then needed)
//                          or read as given;
//   load(at)               kLanes rows of a group's step at `at`;
//   broadcast(x)           kStepWeights activations to every lane;
//   madd(w, x, acc)        acc plus the step's products.
// Include inside the ORZO_TARGET region of an AVX2 or AVX-512 level, after vec.hpp;
// internal linkage, as target.hpp explains.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see target.hpp

// The vectors of a group's step: one on AVX-512, two on AVX2.
constexpr int kGroupVecs = kPackedRows / kLanes;
static_assert(kGroupVecs * kLanes == kPackedRows, "a group's step is whole vectors");

// Tiles: up to kPanelRows activation rows by kWideGroups groups, or kFewRows by kFewGroups
// where a block of activation rows is that short, so that a row keeps more sums in flight.
// AVX-512's 32 registers hold 24 sums either way (12 x 2, 6 x 4); AVX2's 16 hold 12 (6 x 1
// group of two vectors) or 8 (2 x 2).
#if ORZO_SIMD_AVX512
constexpr int kPanelRows = 12, kWideGroups = 2, kFewRows = 6, kFewGroups = 4;
inline void panel_store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
#else
constexpr int kPanelRows = 6, kWideGroups = 1, kFewRows = 2, kFewGroups = 2;
inline void panel_store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
#endif

template <class P>
struct PanelJob {
  const typename P::X* x;  // m rows of k, ldx apart
  int64_t m, k, ldx;
  const uint8_t* groups;  // the packed rows, a group's tiles k * 32 bytes
  size_t row_bytes;       // a row's stored bytes, by which matmuls() weighs columns
  float* y;
  int64_t n;
  const float* bias;
};

// A group's bytes: 16 rows of k 16-bit weights.
inline size_t panel_group_bytes(int64_t k) { return static_cast<size_t>(k) * 2 * kPackedRows; }

// A group's tiles stream from memory where few activation rows meet them: fetched this
// far ahead into L2 (two 1 KiB tiles).
constexpr int64_t kPanelAhead = 2048;

// Activation rows [i0, i0 + M) against groups [g0, g0 + G), fetching into L2 what lies
// `ahead` bytes past each weight it loads.
template <class P, int M, int G>
void panel_tile(const PanelJob<P>& job, int64_t g0, int64_t i0, int64_t ahead) {
  constexpr int64_t kStepBytes = 2 * kPackedRows * P::kStepWeights, kVecBytes = kStepBytes / kGroupVecs;
  constexpr int V = kGroupVecs;
  const size_t group_bytes = panel_group_bytes(job.k);
  const uint8_t* w = job.groups + static_cast<size_t>(g0) * group_bytes;
  const typename P::X* x = job.x + i0 * job.ldx;
  Vec acc[M][G][V];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][g][v] = vzero();
  for (int64_t s = 0; s < job.k / P::kStepWeights; ++s) {
    Vec wv[G][V];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint8_t* at = w + g * group_bytes + s * kStepBytes;
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) wv[g][v] = P::load(at + v * kVecBytes);
      __builtin_prefetch(at + ahead, 0, 2);
    }
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const Vec xv = P::broadcast(x + i * job.ldx + s * P::kStepWeights);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) acc[i][g][v] = P::madd(wv[g][v], xv, acc[i][g][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const int64_t c = (g0 + g) * kPackedRows + v * kLanes;
        panel_store(job.y + (i0 + i) * job.n + c, job.bias ? vadd(acc[i][g][v], vload(job.bias + c)) : acc[i][g][v]);
      }
}

template <class P>
using PanelTile = void (*)(const PanelJob<P>&, int64_t, int64_t, int64_t);

template <class P, int G, int M = 1>
constexpr void fill_tiles(PanelTile<P>* out) {
  out[M] = panel_tile<P, M, G>;
  if constexpr (M < (G == kFewGroups ? kFewRows : kPanelRows)) fill_tiles<P, G, M + 1>(out);
}
template <class P, int G>
PanelTile<P> tile_of(int64_t rows) {
  static const auto table = [] {
    std::array<PanelTile<P>, kPanelRows + 1> t{};
    fill_tiles<P, G>(t.data());
    return t;
  }();
  return table[static_cast<size_t>(rows)];
}

// The activation rows that share a pass over the weights: as many as keep half of a 1 MiB
// L2 beside the pair of groups they meet.
constexpr int64_t kPanelXBytes = int64_t{512} << 10;

// Columns [begin, end), whole groups. Per block of activation rows, every pair of groups in
// turn meets all of the block's rows while it is in L2: a weight comes from memory once
// per block, and an activation from L2 once per pair.
template <class P>
void panel_range(const PanelJob<P>& job, int64_t begin, int64_t end) {
  const int64_t first = begin / kPackedRows, last = end / kPackedRows;
  const int64_t x_row_bytes = job.ldx * static_cast<int64_t>(sizeof(typename P::X));
  const int64_t block = std::max<int64_t>(kPanelRows, kPanelXBytes / x_row_bytes / kPanelRows * kPanelRows);
  // The first pass over a tile's groups fetches their own weights ahead; the later ones the
  // next groups', which the first pass over them then finds in L2.
  const auto next_groups = static_cast<int64_t>(kWideGroups * panel_group_bytes(job.k));
  for (int64_t b0 = 0; b0 < job.m; b0 += block) {
    const int64_t b1 = std::min(job.m, b0 + block);
    int64_t g = first;
    if (b1 - b0 <= kFewRows)
      for (; g + kFewGroups <= last; g += kFewGroups) tile_of<P, kFewGroups>(b1 - b0)(job, g, b0, kPanelAhead);
    for (; g + kWideGroups <= last; g += kWideGroups)
      for (int64_t i0 = b0; i0 < b1; i0 += kPanelRows)
        tile_of<P, kWideGroups>(std::min<int64_t>(kPanelRows, b1 - i0))(
            job, g, i0, i0 == b0 || g + 2 * kWideGroups > last ? kPanelAhead : next_groups);
    for (; g < last; ++g)
      for (int64_t i0 = b0; i0 < b1; i0 += kPanelRows)
        tile_of<P, 1>(std::min<int64_t>(kPanelRows, b1 - i0))(job, g, i0, kPanelAhead);
  }
}

// Where a tile reads its rows' activations: a cache line further apart than k where rows
// would be a multiple of 4 KiB apart (1,024 f32 values, 2,048 bf16). Those fall in one set
// of an L1 cache whose sets span 4 KiB, and a tile's 12 rows then outnumber the 8 ways of a
// Zen 4's L1 (there the F16 tiles ran at 0.75-0.8x the direct kernel's rate at k = 1,024; a
// Zen 5's 12 ways held them). Other strides stay as they are: spreading BF16 rows 2 KiB
// apart (6 a set) too ran its prefill 0.96x on the Zen 4.
template <class X>
int64_t panel_x_stride(int64_t k) {
  constexpr auto kLine = static_cast<int64_t>(64 / sizeof(X));
  return k * static_cast<int64_t>(sizeof(X)) % 4096 == 0 ? k + kLine : k;
}

template <class P>
struct PanelSlot {
  std::vector<typename P::X> x;  // the activations, rounded where P rounds them, panel_x_stride apart
  PanelJob<P> job;
  void (*range)(const PanelJob<P>&, int64_t, int64_t);
};

// y = x · Wᵀ (+ bias) for w's packed rows (TensorView::packed), prepared (RowsJob in isa.hpp).
template <class P>
RowsJob prepare_panels(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                       int slot) {
  // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
  thread_local PanelSlot<P> slots[kRowsJobSlots];
  PanelSlot<P>& kept = slots[slot];
  const int64_t k = w.cols();
  const typename P::X* xs = nullptr;
  // One row has no neighbours to collide with: P reads it where it is, unless it rounds it.
  const int64_t ldx = m > 1 ? panel_x_stride<typename P::X>(k) : k;
  if (P::kRounds || ldx != k) {
    kept.x.resize(std::max(kept.x.size(), static_cast<size_t>(m * ldx)));
    typename P::X* const copy = kept.x.data();
    const auto copy_rows = [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        if constexpr (P::kRounds)
          P::round_row(x + i * k, k, copy + i * ldx);
        else
          std::copy_n(x + i * k, k, copy + i * ldx);
      }
    };
    if (m == 1)
      copy_rows(0, 1, 0);
    else
      pool.parallel_for(m, copy_rows);
    xs = copy;
  } else if constexpr (!P::kRounds) {
    xs = x;
  }
  kept.job = {xs, m, k, ldx, static_cast<const uint8_t*>(w.packed), dtype_row_bytes(w.dtype, k), y, w.rows(), bias};
  kept.range = panel_range<P>;
  // Whole tiles of groups, so that a thread's columns run the widest tiles.
  return rows_job(kept, kWideGroups * kPackedRows);
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
