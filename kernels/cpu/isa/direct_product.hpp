#pragma once
// The blocking of the direct product (kernels/cpu/matmul_direct.hpp), for any weight
// format of isa/weight_formats.hpp and the activations it meets: R weight rows against M
// activation rows per pass, the activations packed once per product, the weight rows of a
// thread taken an L2-sized chunk at a time. prepare_direct<F> prepares the whole product for one
// format. Include it inside the ORZO_TARGET_BEGIN region, after weight_formats.hpp;
// internal linkage, as target.hpp explains.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa/vec.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): see target.hpp

// f32 activations, which every weight format meets by default: one FMA per vector of
// weights.
struct F32Activations {
  using T = float;
  static constexpr int64_t kPerVec = kLanes;
  static T from_f32(float f) { return f; }
  static float to_f32(T v) { return v; }
  static Vec load(const T* p) { return vload(p); }
  static Vec madd(Vec w, Vec x, Vec acc) { return vfma(w, x, acc); }
};

// A format meets the activations it names as X, f32 ones otherwise.
template <class F, class = void>
struct ActivationsOf {
  using type = F32Activations;
};
template <class F>
struct ActivationsOf<F, std::void_t<typename F::X>> {
  using type = typename F::X;
};

// A format whose Scales (computed once per unit by scales(unit)) give each of its kParts
// parts (32 / kParts weights) a scale d and an offset m leaves the offsets to the product:
// its load(unit, sub, scales, out) gives d * q, the raw codes scaled, and the product adds
// m * (sum of x over the part), one FMA per unit and lane group of parts, against the part
// sums of x that prepare_direct computes once per product, where d * q + m cost one op more
// per vector. Where kScalesInLoad is false (AVX2, weight_formats.hpp) load() leaves d to
// the product too: a part's dot is d * (codes . x), one FMA per part.
template <class F, class = void>
struct PartScales : std::false_type {};
template <class F>
struct PartScales<F, std::void_t<decltype(F::kParts)>> : std::true_type {};

// A block format whose sub-step spans four vectors or more (AVX2's 32 weights, or the
// portable path's whole blocks) sums each sub-step in a register of its own and adds that
// to the accumulator: the chain through an accumulator is then one add per sub-step, not
// kVecs FMAs (on Zen 3, with one weight row a pass, Q4_K_M decode went from 65 to ~110
// tokens/s; at the two rows a pass it runs with, the gain was within the noise), and the
// rows are decoded one at a time, so a single row's sub-step is live. AVX-512's sub-steps
// are two vectors, and they keep the single chain they were measured with.
template <class F>
constexpr bool kSubStepSums = F::kBlocked && F::kVecs >= 4 && std::is_same_v<typename ActivationsOf<F>::type, F32Activations>;

// A format whose load() gives a sub-step unscaled, one scale for all of it, names that
// scale as sub_scale(unit, sub): the sub-step's sum is multiplied by it once.
template <class F, class = void>
struct ScalesAfterSum : std::false_type {};
template <class F>
struct ScalesAfterSum<F, std::void_t<decltype(F::sub_scale(nullptr, 0))>> : std::true_type {};

struct NoScales {};
template <class F, class = void>
struct ScalesOf {
  using type = NoScales;
};
template <class F>
struct ScalesOf<F, std::void_t<typename F::Scales>> {
  using type = typename F::Scales;
};

// Sub-step `sub` of a unit into kVecs registers, with the unit's scales where its format
// has them.
template <class F>
inline void load_step(const uint8_t* unit, int sub, [[maybe_unused]] const typename ScalesOf<F>::type& scales, Vec* out) {
  if constexpr (PartScales<F>::value)
    F::load(unit, sub, scales, out);
  else
    F::load(unit, sub, out);
}

template <class F>
constexpr int64_t parts_per_row(int64_t k) {
  if constexpr (PartScales<F>::value)
    return k / 32 * F::kParts;
  else
    return 0;
}

// A pass dots R weight rows with M activation rows: R * M accumulators, R decoded weight
// steps (kVecs registers each) and one activation vector in registers, and a spare. Each
// step of k loads R weight steps and M activation vectors for R * M FMAs; the shape chosen
// is the one with the most FMAs per load that fits (R <= 4, M <= kGroup, M <= m).
struct Shape {
  int m, r;
};

constexpr bool fits(int m, int r, int vecs) { return r * m + r * vecs + 2 <= kRegisters; }

// At most this many activation rows share one pass over a block of weight rows.
constexpr int64_t kGroup = 8;

constexpr Shape best_shape(int64_t m, int vecs) {
  Shape best{1, 1};
  double best_rate = 0.0;
  for (int rows = 1; rows <= kGroup && rows <= m; ++rows)
    for (int r = 1; r <= 4; ++r) {
      const double rate = static_cast<double>(r * rows) / (r * vecs + rows);
      if (fits(rows, r, vecs) && rate > best_rate + 1e-9) best = {rows, r}, best_rate = rate;
    }
  return best;
}

// Activation rows are regrouped so that the M vectors one step needs are adjacent: within
// a group of M rows, the values [c * P, (c + 1) * P) of row i (P = X::kPerVec, a vector's
// worth) sit at (c * M + i) * P. Row-major x would put them a whole row apart, and rows of
// 2^n floats all map to the same L1 set. A single f32 row is its own packed form.
template <class X>
int64_t packed_row(int64_t k) {
  return (k + X::kPerVec - 1) / X::kPerVec * X::kPerVec;
}

// Rows [begin, end) of x, which start a group of `group` rows (the last may be shorter).
template <class X>
void pack_activations(const float* x, int64_t m, int64_t k, int64_t group, int64_t begin, int64_t end,
                      typename X::T* packed) {
  constexpr int64_t P = X::kPerVec;
  const int64_t chunks = packed_row<X>(k) / P;
  for (int64_t i0 = begin; i0 < end; i0 += group) {
    const int64_t rows = std::min(group, m - i0);
    typename X::T* dst_group = packed + i0 * packed_row<X>(k);
    for (int64_t i = 0; i < rows; ++i) {
      const float* src = x + (i0 + i) * k;
      for (int64_t c = 0; c < chunks; ++c) {
        typename X::T* dst = dst_group + (c * rows + i) * P;
        const int64_t valid = std::min(P, k - c * P);
        for (int64_t l = 0; l < valid; ++l) dst[l] = X::from_f32(src[c * P + l]);
        std::fill(dst + valid, dst + P, X::from_f32(0.0f));
      }
    }
  }
}

// out[r][i] = dot(weight row r, activation row i) for R consecutive weight rows and a
// packed group of M activation rows. `next` is the block of R rows to prefetch.
template <class F, int M, int R>
void dot_rows(const uint8_t* w, const uint8_t* next, size_t row_bytes, const typename ActivationsOf<F>::type::T* x,
              [[maybe_unused]] const float* part_sums, int64_t k, float (&out)[R][M]) {
  using X = typename ActivationsOf<F>::type;
  Vec acc[R][M];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) acc[r][i] = vzero();
  const int64_t steps = k / F::kStep;
  constexpr int64_t kSubBytes = F::kStepBytes / F::kSubs;
  for (int64_t s = 0; s < steps; ++s) {
    [[maybe_unused]] typename ScalesOf<F>::type scales[R];
    if constexpr (PartScales<F>::value)
      for (int r = 0; r < R; ++r) scales[r] = F::scales(w + r * row_bytes + s * F::kStepBytes);
#pragma GCC unroll 8
    for (int sub = 0; sub < F::kSubs; ++sub) {
      const typename X::T* xs = x + (s * F::kSubs + sub) * F::kVecs * M * X::kPerVec;
      if constexpr (kSubStepSums<F>) {
        // Row by row, so only one row's decoded sub-step is live.
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __builtin_prefetch(next + r * row_bytes + s * F::kStepBytes + sub * kSubBytes, 0, 2);
          const uint8_t* unit = w + r * row_bytes + s * F::kStepBytes;
          Vec wv[F::kVecs];
          load_step<F>(unit, sub, scales[r], wv);
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) {
            if constexpr (PartScales<F>::value && !kScalesInLoad) {
              constexpr int kPartVecs = F::kVecs / F::kParts;
#pragma GCC unroll 4
              for (int p = 0; p < F::kParts; ++p) {
                const int v0 = p * kPartVecs;
                Vec part = vmul(wv[v0], X::load(xs + (v0 * M + i) * X::kPerVec));
#pragma GCC unroll 32
                for (int v = v0 + 1; v < v0 + kPartVecs; ++v)
                  part = vfma(wv[v], X::load(xs + (v * M + i) * X::kPerVec), part);
                acc[r][i] = vfma(part, vset1(scales[r].d[sub * F::kParts + p]), acc[r][i]);
              }
            } else {
              Vec part = vmul(wv[0], X::load(xs + i * X::kPerVec));
#pragma GCC unroll 32
              for (int v = 1; v < F::kVecs; ++v) part = vfma(wv[v], X::load(xs + (v * M + i) * X::kPerVec), part);
              if constexpr (ScalesAfterSum<F>::value)
                acc[r][i] = vfma(part, vset1(F::sub_scale(unit, sub)), acc[r][i]);
              else
                acc[r][i] = vadd(acc[r][i], part);
            }
          }
        }
        continue;
      }
      Vec wv[R][F::kVecs];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) load_step<F>(w + r * row_bytes + s * F::kStepBytes, sub, scales[r], wv[r]);
      // The next block of rows is fetched into L2 while this one is computed: the
      // hardware prefetchers restart at every row, and rows of a few KiB are too short
      // for them to reach full speed (measured on Zen 4: Q8_0 decode from ~60% to ~95%
      // of the read bandwidth).
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        __builtin_prefetch(next + r * row_bytes + s * F::kStepBytes + sub * kSubBytes, 0, 2);
#pragma GCC unroll 32
      for (int v = 0; v < F::kVecs; ++v)
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          Vec xv = X::load(xs + (v * M + i) * X::kPerVec);
          keep_in_register(xv);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[r][i] = X::madd(wv[r][v], xv, acc[r][i]);
        }
    }
    if constexpr (PartScales<F>::value) {
      static_assert(kScalesInLoad || kSubStepSums<F>, "a part's scale is applied to its sum");
      constexpr int kUnitParts = F::kSubs * F::kParts;
      // Q4_K's eight parts a unit fill half of an AVX-512 vector: the other lanes add 0 * 0.
      static_assert(kUnitParts % kLanes == 0 || kUnitParts < kLanes, "a unit's offsets fill whole vectors or one part");
      constexpr int kWidth = std::min(kUnitParts, kLanes);
      const int64_t parts = parts_per_row<F>(k);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int g = 0; g < kUnitParts; g += kLanes) {
          const Vec sums = vload_first(part_sums + i * parts + s * kUnitParts + g, kWidth);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[r][i] = vfma(vload_first(scales[r].m + g, kWidth), sums, acc[r][i]);
        }
    }
  }
  vsums(&acc[0][0], R * M, &out[0][0]);
  if constexpr (!F::kBlocked) {
    for (int64_t c = steps * F::kStep; c < k; ++c) {
      const typename X::T* xc = x + (c / X::kPerVec) * M * X::kPerVec + c % X::kPerVec;
      for (int r = 0; r < R; ++r) {
        const float wc = F::element(w + r * row_bytes, c);
        for (int i = 0; i < M; ++i) out[r][i] += wc * X::to_f32(xc[i * X::kPerVec]);
      }
    }
  }
}

template <class T>
struct Job {
  const T* x;
  const float* part_sums;  // parts_per_row(k) a row, for PartScales formats
  int64_t m, k;
  const uint8_t* w;
  size_t row_bytes;
  float* y;
  int64_t n;
  const float* bias;
};

template <class F>
using JobOf = Job<typename ActivationsOf<F>::type::T>;

// Weight rows [j, j + R) against activation rows [i0, i0 + M), written to y, while the R
// rows from `ahead` are fetched into L2.
template <class F, int M, int R>
void block(const JobOf<F>& job, int64_t j, int64_t i0, int64_t ahead) {
  const uint8_t* rows = job.w + j * job.row_bytes;
  const uint8_t* next = job.w + ahead * job.row_bytes;
  float out[R][M];
  dot_rows<F, M, R>(rows, next, job.row_bytes, job.x + i0 * packed_row<typename ActivationsOf<F>::type>(job.k),
                    job.part_sums + i0 * parts_per_row<F>(job.k), job.k, out);
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[(i0 + i) * job.n + j + r] = out[r][i] + b;
  }
}

template <class F>
using BlockFn = void (*)(const JobOf<F>&, int64_t, int64_t, int64_t);

template <class F, int M, int R>
constexpr BlockFn<F> block_if_fits() {
  if constexpr (fits(M, R, F::kVecs)) {
    return block<F, M, R>;
  } else {
    return nullptr;
  }
}

// The weight rows of one thread are taken this many bytes at a time, and every group of
// activation rows passes over a chunk while it is in L2 (Zen 3 has 512 KiB per core): so
// a weight byte comes from memory once per product, and an activation from L2 once per R
// weight rows, where walking all rows of x for each R rows streamed x from L3 (a 512-row
// x is 2 MiB at k = 1024).
constexpr size_t kChunkBytes = size_t{192} << 10;

// Weight rows [begin, end) against all activation rows, in groups of M (the last group
// shorter), R weight rows at a time (the last rows one at a time). A row's arithmetic is
// dot_rows' whatever its group, so a result does not depend on m.
//
// The first group's pass over a chunk fetches each block's next R rows. Where several
// groups pass over a chunk, the later passes fetch the next chunk too, each block of it
// in one of them: the first pass then finds its rows in L2 instead of waiting on memory
// while it does a group's share of the work (on a Zen 5, F16 weights against 32 rows ran
// 1.07-1.16x as fast, matmul_bench matmul/F16/m32/).
template <class F, int M, int R>
void rows_range(const JobOf<F>& job, int64_t begin, int64_t end) {
  static constexpr BlockFn<F> tail_group[] = {
      nullptr,
      block_if_fits<F, 1, R>(),
      block_if_fits<F, 2, R>(),
      block_if_fits<F, 3, R>(),
      block_if_fits<F, 4, R>(),
      block_if_fits<F, 5, R>(),
      block_if_fits<F, 6, R>(),
      block_if_fits<F, 7, R>(),
  };
  static constexpr BlockFn<F> tail_group_one_row[] = {
      nullptr,
      block_if_fits<F, 1, 1>(),
      block_if_fits<F, 2, 1>(),
      block_if_fits<F, 3, 1>(),
      block_if_fits<F, 4, 1>(),
      block_if_fits<F, 5, 1>(),
      block_if_fits<F, 6, 1>(),
      block_if_fits<F, 7, 1>(),
  };
  static_assert(M <= kGroup && sizeof(tail_group) / sizeof(tail_group[0]) == kGroup, "one entry per tail size");
  const int64_t chunk = std::max<int64_t>(R, static_cast<int64_t>(kChunkBytes / job.row_bytes) / R * R);
  const int64_t later_passes = (job.m + M - 1) / M - 1;
  for (int64_t c = begin; c < end; c += chunk) {
    const int64_t stop = std::min(end, c + chunk), next_stop = std::min(end, stop + chunk);
    for (int64_t i0 = 0, pass = 0; i0 < job.m; i0 += M, ++pass) {
      const int64_t rows = std::min<int64_t>(M, job.m - i0);
      const BlockFn<F> wide = rows == M ? block<F, M, R> : tail_group[rows];
      const BlockFn<F> narrow = rows == M ? block_if_fits<F, M, 1>() : tail_group_one_row[rows];
      int64_t j = c;
      for (; j + R <= stop; j += R) {
        int64_t ahead = j;
        if (pass == 0) {
          if (j + 2 * R <= job.n) ahead = j + R;
        } else if (const int64_t there = stop + (j - c);
                   ((j - c) / R) % later_passes == pass - 1 && there + R <= next_stop) {
          ahead = there;
        }
        wide(job, j, i0, ahead);
      }
      for (; j < stop; ++j) narrow(job, j, i0, j);
    }
  }
}

template <class F>
using RangeKernel = void (*)(const JobOf<F>&, int64_t, int64_t);

template <class F, int Rows>
constexpr RangeKernel<F> range_kernel() {
  constexpr Shape s = best_shape(Rows, F::kVecs);
  return rows_range<F, s.m, s.r>;
}

// The kernel for each m up to kGroup; larger m take kGroup's.
template <class F>
Shape shape_for(int64_t m) {
  return best_shape(std::min(m, kGroup), F::kVecs);
}

template <class F>
RangeKernel<F> kernel_for_rows(int64_t m) {
  static constexpr RangeKernel<F> by_rows[] = {
      nullptr,
      range_kernel<F, 1>(),
      range_kernel<F, 2>(),
      range_kernel<F, 3>(),
      range_kernel<F, 4>(),
      range_kernel<F, 5>(),
      range_kernel<F, 6>(),
      range_kernel<F, 7>(),
      range_kernel<F, 8>(),
  };
  return by_rows[std::min(m, kGroup)];
}

// PartScales' sums of x over each part of rows [begin, end), parts_per_row(k) a row; nothing
// for the other formats.
template <class F>
void sum_parts([[maybe_unused]] const float* x, [[maybe_unused]] int64_t k, [[maybe_unused]] int64_t begin,
               [[maybe_unused]] int64_t end, [[maybe_unused]] float* out) {
  if constexpr (PartScales<F>::value) {
    const int64_t parts = parts_per_row<F>(k), width = 32 / F::kParts;
    for (int64_t i = begin; i < end; ++i)
      for (int64_t p = 0; p < parts; ++p) {
        const float* xp = x + i * k + p * width;
        float sum = 0.0f;
        for (int64_t c = 0; c < width; ++c) sum += xp[c];
        out[i * parts + p] = sum;
      }
  }
}

// Chunks of 16 output columns keep two threads from writing the same cache line of y.
constexpr int64_t kGrain = 16;

// What prepare_direct<F> keeps for its RowsJob: x as the kernel reads it, and the job.
template <class F>
struct DirectSlot {
  std::vector<typename ActivationsOf<F>::type::T> packed;
  std::vector<float> sums;
  JobOf<F> job;
  RangeKernel<F> range;
};

// y = x · Wᵀ (+ bias) for a weight stored as F, prepared (RowsJob in isa.hpp).
template <class F>
RowsJob prepare_direct(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                       int slot) {
  using X = typename ActivationsOf<F>::type;
  using T = typename X::T;
  // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
  thread_local DirectSlot<F> slots[kRowsJobSlots];
  DirectSlot<F>& kept = slots[slot];
  const int64_t k = w.cols();
  const T* packed_x = nullptr;
  if constexpr (std::is_same_v<X, F32Activations>) packed_x = x;
  float* part_sums = nullptr;
  if constexpr (PartScales<F>::value) {
    kept.sums.resize(std::max(kept.sums.size(), static_cast<size_t>(m * parts_per_row<F>(k))));
    part_sums = kept.sums.data();
  }
  if (m == 1) sum_parts<F>(x, k, 0, 1, part_sums);
  if (m > 1 || !std::is_same_v<X, F32Activations>) {
    kept.packed.resize(std::max(kept.packed.size(), static_cast<size_t>(m * packed_row<X>(k))));
    T* const out = kept.packed.data();
    const int64_t group = shape_for<F>(m).m;
    pool.parallel_for((m + group - 1) / group, [&](int64_t begin, int64_t end, int) {
      const int64_t first = begin * group, last = std::min(m, end * group);
      pack_activations<X>(x, m, k, group, first, last, out);
      sum_parts<F>(x, k, first, last, part_sums);
    });
    packed_x = out;
  }
  kept.job = {packed_x, part_sums, m, k, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias};
  kept.range = kernel_for_rows<F>(m);
  return rows_job(kept, kGrain);
}

}  // namespace
}  // namespace orzo::cpu::ORZO_ISA_NS
