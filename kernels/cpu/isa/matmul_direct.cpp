// The product without a packed copy of the weight, for one ISA level (what it is and why:
// kernels/cpu/matmul_direct.hpp).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// Weight rows decoded together: more rows reuse each activation load and give more
// independent FMA chains, as long as accumulators and decoded weights stay in registers.
constexpr int rows_per_pass(int m, int vecs) {
  for (int r = 4; r > 1; --r)
    if (r * (m + vecs) + 2 <= kRegisters) return r;
  return 1;
}

// At most this many activation rows share one pass over a block of weight rows.
constexpr int64_t kGroup = 8;

// Activation rows are regrouped so that the M vectors one step needs are adjacent: within
// a group of M rows, lanes [c * kLanes, (c + 1) * kLanes) of row i sit at (c * M + i) *
// kLanes. Row-major x would put them a whole row apart, and rows of 2^n floats all map to
// the same L1 set. A single row is its own packed form.
int64_t packed_row(int64_t k) { return (k + kLanes - 1) / kLanes * kLanes; }

void pack_activations(const float* x, int64_t m, int64_t k, float* packed) {
  const int64_t chunks = packed_row(k) / kLanes;
  for (int64_t i0 = 0; i0 < m; i0 += kGroup) {
    const int64_t rows = std::min(kGroup, m - i0);
    float* group = packed + i0 * packed_row(k);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t valid = std::min<int64_t>(kLanes, k - c * kLanes);
        float* dst = group + (c * rows + i) * kLanes;
        std::copy(x + (i0 + i) * k + c * kLanes, x + (i0 + i) * k + c * kLanes + valid, dst);
        std::fill(dst + valid, dst + kLanes, 0.0f);
      }
    }
  }
}

// out[r][i] = dot(weight row r, activation row i) for R consecutive weight rows and a
// packed group of M activation rows. `next` is the block of R rows to prefetch.
template <class F, int M, int R>
void dot_rows(const uint8_t* w, const uint8_t* next, size_t row_bytes, const float* x, int64_t k,
              float (&out)[R][M]) {
  Vec acc[R][M];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) acc[r][i] = vzero();
  const int64_t steps = k / F::kStep;
  constexpr int64_t kSubBytes = F::kStepBytes / F::kSubs;
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 8
    for (int sub = 0; sub < F::kSubs; ++sub) {
      Vec wv[R][F::kVecs];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) F::load(w + r * row_bytes + s * F::kStepBytes, sub, wv[r]);
      // The next block of rows is fetched into L2 while this one is computed: the
      // hardware prefetchers restart at every row, and rows of a few KiB are too short
      // for them to reach full speed (measured on Zen 4: Q8_0 decode from ~60% to ~95%
      // of the read bandwidth).
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        __builtin_prefetch(next + r * row_bytes + s * F::kStepBytes + sub * kSubBytes, 0, 2);
#pragma GCC unroll 32
      for (int v = 0; v < F::kVecs; ++v) {
        const float* xs = x + ((s * F::kSubs + sub) * F::kVecs + v) * M * kLanes;
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          Vec xv = vload(xs + i * kLanes);
          keep_in_register(xv);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[r][i] = vfma(wv[r][v], xv, acc[r][i]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) out[r][i] = vsum(acc[r][i]);
  if constexpr (!F::kBlocked) {
    for (int64_t c = steps * F::kStep; c < k; ++c) {
      const float* xc = x + (c / kLanes) * M * kLanes + c % kLanes;
      for (int r = 0; r < R; ++r) {
        const float wc = F::element(w + r * row_bytes, c);
        for (int i = 0; i < M; ++i) out[r][i] += wc * xc[i * kLanes];
      }
    }
  }
}

struct Job {
  const float* x;
  int64_t m, k;
  const uint8_t* w;
  size_t row_bytes;
  float* y;
  int64_t n;
  const float* bias;
};

// Weight rows [j, j + R) against activation rows [i0, i0 + M), written to y.
template <class F, int M, int R>
void block(const Job& job, int64_t j, int64_t i0) {
  const uint8_t* rows = job.w + j * job.row_bytes;
  const uint8_t* next = j + 2 * R <= job.n ? rows + R * job.row_bytes : rows;
  float out[R][M];
  dot_rows<F, M, R>(rows, next, job.row_bytes, job.x + i0 * packed_row(job.k), job.k, out);
  for (int r = 0; r < R; ++r) {
    const float b = job.bias ? job.bias[j + r] : 0.0f;
    for (int i = 0; i < M; ++i) job.y[(i0 + i) * job.n + j + r] = out[r][i] + b;
  }
}

using BlockFn = void (*)(const Job&, int64_t, int64_t);

// Only the shapes whose accumulators fit in registers are instantiated.
template <class F, int M, int R>
constexpr BlockFn block_if_fits() {
  if constexpr (rows_per_pass(M, F::kVecs) >= R) {
    return block<F, M, R>;
  } else {
    return nullptr;
  }
}

// More activation rows than fit in registers are taken kGroup at a time while the R
// weight rows are still in cache, so the weight is read from memory once whatever m is.
template <class F, int R>
void rows_block(const Job& job, int64_t j) {
  static constexpr BlockFn by_rows[] = {
      nullptr,
      block_if_fits<F, 1, R>(),
      block_if_fits<F, 2, R>(),
      block_if_fits<F, 3, R>(),
      block_if_fits<F, 4, R>(),
      block_if_fits<F, 5, R>(),
      block_if_fits<F, 6, R>(),
      block_if_fits<F, 7, R>(),
      block_if_fits<F, 8, R>(),
  };
  static_assert(sizeof(by_rows) / sizeof(by_rows[0]) == kGroup + 1, "one entry per group size");
  int64_t i0 = 0;
  for (; job.m - i0 >= kGroup; i0 += kGroup) by_rows[kGroup](job, j, i0);
  if (i0 < job.m) by_rows[job.m - i0](job, j, i0);
}

template <class F, int R>
void rows_range(const Job& job, int64_t begin, int64_t end) {
  int64_t j = begin;
  for (; j + R <= end; j += R) rows_block<F, R>(job, j);
  for (; j < end; ++j) rows_block<F, 1>(job, j);
}

using RangeKernel = void (*)(const Job&, int64_t, int64_t);

template <class F>
RangeKernel kernel_for_rows(int64_t m) {
  switch (rows_per_pass(static_cast<int>(std::min(m, kGroup)), F::kVecs)) {
    case 4: return rows_range<F, 4>;
    case 3: return rows_range<F, 3>;
    case 2: return rows_range<F, 2>;
    default: return rows_range<F, 1>;
  }
}

RangeKernel kernel_for(DType t, int64_t m) {
  switch (t) {
    case DType::F32: return kernel_for_rows<F32Format>(m);
    case DType::F16: return kernel_for_rows<F16Format>(m);
    case DType::BF16: return kernel_for_rows<BF16Format>(m);
    case DType::Q8_0: return kernel_for_rows<Q8_0Format>(m);
    case DType::Q4_0: return kernel_for_rows<Q4_0Format>(m);
    case DType::Q4_1: return kernel_for_rows<Q4_1Format>(m);
    case DType::Q5_0: return kernel_for_rows<Q5_0Format>(m);
    case DType::Q5_1: return kernel_for_rows<Q5_1Format>(m);
    case DType::Q2_K: return kernel_for_rows<Q2_KFormat>(m);
    case DType::Q3_K: return kernel_for_rows<Q3_KFormat>(m);
    case DType::Q4_K: return kernel_for_rows<Q4_KFormat>(m);
    case DType::Q5_K: return kernel_for_rows<Q5_KFormat>(m);
    case DType::Q6_K: return kernel_for_rows<Q6_KFormat>(m);
    case DType::IQ4_NL: return kernel_for_rows<IQ4_NLFormat>(m);
    case DType::IQ4_XS: return kernel_for_rows<IQ4_XSFormat>(m);
  }
  throw std::logic_error("matmul_direct: unknown dtype");
}

// Chunks of 16 output columns keep two threads from writing the same cache line of y.
constexpr int64_t kGrain = 16;

}  // namespace

void matmul_direct(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                   const float* bias) {
  const int64_t k = w.cols();
  if (m > 1) {
    // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
    thread_local std::vector<float> packed;
    packed.resize(std::max(packed.size(), static_cast<size_t>(m * packed_row(k))));
    pack_activations(x, m, k, packed.data());
    x = packed.data();
  }
  const Job job{x, m, k, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias};
  const RangeKernel kernel = kernel_for(w.dtype, m);
  pool.parallel_for(job.n, [&](int64_t begin, int64_t end, int) { kernel(job, begin, end); }, kGrain);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
