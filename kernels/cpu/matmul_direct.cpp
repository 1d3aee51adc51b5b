#include "kernels/cpu/matmul_direct.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/simd.hpp"

namespace orzo::cpu {
namespace {

// One SIMD register of f32 lanes and the few operations the kernel needs. Where no
// vector unit is available a "vector" is a single float, so the kernel below is the
// portable path too.
#if defined(__AVX512F__) && defined(__F16C__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr int kRegisters = 32;
Vec vzero() { return _mm512_setzero_ps(); }
Vec vload(const float* p) { return _mm512_loadu_ps(p); }
Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
float vsum(Vec v) { return _mm512_reduce_add_ps(v); }
Vec load_f32(const uint8_t* p) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p)); }
Vec load_f16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
Vec load_bf16(const uint8_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
void load_q8_0(const uint8_t* block, Vec* out) {
  const Vec d = _mm512_set1_ps(_cvtsh_ss(load_u16(block)));
  for (int v = 0; v < 2; ++v) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + 16 * v));
    out[v] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
  }
}
// vpermps reads only the low four bits of each index, so a 16-entry table of (q - 8) * d
// decodes the nibbles without masking or an int-to-float conversion.
void load_q4_0(const uint8_t* block, Vec* out) {
  const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512 table = _mm512_mul_ps(levels, _mm512_set1_ps(_cvtsh_ss(load_u16(block))));
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
  out[0] = _mm512_permutexvar_ps(bytes, table);
  out[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr int kRegisters = 16;
Vec vzero() { return _mm256_setzero_ps(); }
Vec vload(const float* p) { return _mm256_loadu_ps(p); }
Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
float vsum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
Vec load_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
Vec load_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
Vec load_bf16(const uint8_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
void load_q8_0(const uint8_t* block, Vec* out) {
  const Vec d = _mm256_set1_ps(_cvtsh_ss(load_u16(block)));
  for (int v = 0; v < 4; ++v) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * v));
    out[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
  }
}
void load_q4_0(const uint8_t* block, Vec* out) {
  const Vec d = _mm256_set1_ps(_cvtsh_ss(load_u16(block)));
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i halves[2] = {_mm_and_si128(bytes, nibble), _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble)};
  for (int v = 0; v < 4; ++v) {
    const __m128i part = v % 2 == 0 ? halves[v / 2] : _mm_srli_si128(halves[v / 2], 8);
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(part), _mm256_set1_epi32(8));
    out[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  }
}
#else
using Vec = float;
constexpr int kLanes = 1;
constexpr int kRegisters = 16;
Vec vzero() { return 0.0f; }
Vec vload(const float* p) { return *p; }
Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
float vsum(Vec v) { return v; }
Vec load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}
Vec load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }
Vec load_bf16(const uint8_t* p) { return bf16_to_f32(load_u16(p)); }
void load_q8_0(const uint8_t* block, Vec* out) {
  const float d = f16_to_f32(load_u16(block));
  for (int j = 0; j < kQuantBlock; ++j) out[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}
void load_q4_0(const uint8_t* block, Vec* out) {
  const float d = f16_to_f32(load_u16(block));
  for (int j = 0; j < kQuantBlock / 2; ++j) {
    out[j] = static_cast<float>((block[2 + j] & 0x0f) - 8) * d;
    out[j + kQuantBlock / 2] = static_cast<float>((block[2 + j] >> 4) - 8) * d;
  }
}
#endif

// GCC folds a load into every FMA that uses it, turning R FMAs on one activation vector
// into R loads of it; at one 512-bit load per cycle that, not the FMAs, would bound the
// kernel. An empty asm that claims to change the register makes the load happen once.
inline void keep_in_register([[maybe_unused]] Vec& v) {
#if defined(__GNUC__) && (defined(__AVX2__) || defined(__AVX512F__))
  asm("" : "+v"(v));
#endif
}

// How each stored type is walked: a step of kStepBytes decodes kVecs registers (kStep
// elements) of one row. Plain float types leave a tail of k % kLanes elements for
// element(); the block types never do, since their rows are whole blocks.
struct F32Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 4 * kStep;
  static constexpr int kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, Vec* out) { out[0] = load_f32(p); }
  static float element(const uint8_t* row, int64_t c) {
    float f;
    std::memcpy(&f, row + 4 * c, sizeof f);
    return f;
  }
};

struct F16Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 2 * kStep;
  static constexpr int kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, Vec* out) { out[0] = load_f16(p); }
  static float element(const uint8_t* row, int64_t c) { return f16_to_f32(load_u16(row + 2 * c)); }
};

struct BF16Format {
  static constexpr int64_t kStep = kLanes, kStepBytes = 2 * kStep;
  static constexpr int kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, Vec* out) { out[0] = load_bf16(p); }
  static float element(const uint8_t* row, int64_t c) { return bf16_to_f32(load_u16(row + 2 * c)); }
};

struct Q8_0Format {
  static constexpr int64_t kStep = kQuantBlock, kStepBytes = sizeof(BlockQ8_0);
  static constexpr int kVecs = kQuantBlock / kLanes;
  static constexpr bool kBlocked = true;
  static void load(const uint8_t* p, Vec* out) { load_q8_0(p, out); }
};

struct Q4_0Format {
  static constexpr int64_t kStep = kQuantBlock, kStepBytes = sizeof(BlockQ4_0);
  static constexpr int kVecs = kQuantBlock / kLanes;
  static constexpr bool kBlocked = true;
  static void load(const uint8_t* p, Vec* out) { load_q4_0(p, out); }
};

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
  for (int64_t s = 0; s < steps; ++s) {
    Vec wv[R][F::kVecs];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) F::load(w + r * row_bytes + s * F::kStepBytes, wv[r]);
    // The next block of rows is fetched into L2 while this one is computed: the
    // hardware prefetchers restart at every row, and rows of a few KiB are too short
    // for them to reach full speed (measured on Zen 4: Q8_0 decode from ~60% to ~95%
    // of the read bandwidth).
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) __builtin_prefetch(next + r * row_bytes + s * F::kStepBytes, 0, 2);
#pragma GCC unroll 32
    for (int v = 0; v < F::kVecs; ++v) {
      const float* xs = x + (s * F::kVecs + v) * M * kLanes;
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        Vec xv = vload(xs + i * kLanes);
        keep_in_register(xv);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][i] = vfma(wv[r][v], xv, acc[r][i]);
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

}  // namespace orzo::cpu
