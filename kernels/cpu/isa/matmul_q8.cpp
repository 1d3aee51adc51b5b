// The integer product of the block types (kernels/cpu/matmul_q8.hpp).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"
#include "kernels/cpu/packed_rows.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"
#include "kernels/cpu/isa/int8_product.hpp"
#include "kernels/cpu/isa/int8_avx512.hpp"
#include "kernels/cpu/isa/int8_avx2.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage, as target.hpp explains

#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)

// Both levels' gemv walks (gemv_rows), by the number of activation rows.
template <class F, int Digits>
void gemv_range(const Job<GemvActivationOf<Digits>>& job, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 2, "one case per row count");
  switch (job.m) {
    case 2: gemv_rows<F, Digits, 2>(job, begin, end); break;
    default: gemv_rows<F, Digits, 1>(job, begin, end); break;
  }
}

// The range function of weights of format F against activations laid out as A: the
// gemv's (weights as stored, a few rows) or the batched one's.
template <class A>
struct Kernel {
  void (*range)(const Job<A>&, int64_t, int64_t);
  int activation_bias;
};

template <class F, class A, bool Gemv>
constexpr Kernel<A> kernel_of() {
  if constexpr (Gemv)
    return {gemv_range<F, A::kDigits>, kActivationBias<F>};
  else
    return {rows_range<F, A::kDigits>, kActivationBias<F>};
}

template <class A, bool Gemv>
Kernel<A> kernel_for(DType t) {
  switch (t) {
    case DType::Q8_0: return kernel_of<Q8_0Format, A, Gemv>();
    case DType::Q4_0: return kernel_of<Q4_0Format, A, Gemv>();
    case DType::Q4_1: return kernel_of<Q4_1Format, A, Gemv>();
    case DType::Q5_0: return kernel_of<Q5_0Format, A, Gemv>();
    case DType::Q5_1: return kernel_of<Q5_1Format, A, Gemv>();
    case DType::Q2_K: return kernel_of<Q2_KFormat, A, Gemv>();
    case DType::Q3_K: return kernel_of<Q3_KFormat, A, Gemv>();
    case DType::Q4_K: return kernel_of<Q4_KFormat, A, Gemv>();
    case DType::Q5_K: return kernel_of<Q5_KFormat, A, Gemv>();
    case DType::Q6_K: return kernel_of<Q6_KFormat, A, Gemv>();
    case DType::IQ4_NL: return kernel_of<IQ4_NLFormat, A, Gemv>();
    case DType::IQ4_XS: return kernel_of<IQ4_XSFormat, A, Gemv>();
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  throw std::logic_error("matmul_q8: not a block type");
}

// Chunks of 16 output columns keep two threads from writing the same cache line of y.
constexpr int64_t kGrain = 16;

// What prepare_product keeps for its RowsJob: x rounded as A, and the job.
template <class A>
struct ProductSlot {
  std::vector<A> x;
  Job<A> job;
  void (*range)(const Job<A>&, int64_t, int64_t);
};

template <class Activation>
RowsJob prepare_product(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                        Kernel<Activation> kernel, int slot) {
#if defined(ORZO_Q8_AVX2)
  if (w.packed && w.dtype != DType::Q4_K)
    throw std::logic_error("matmul_q8: " + w.name + " is packed, and AVX2 reads packed Q4_K rows alone");
#endif
  // Reused across calls and never shrunk, so a steady loop neither allocates nor clears.
  thread_local ProductSlot<Activation> slots[kRowsJobSlots];
  ProductSlot<Activation>& kept = slots[slot];
  const int64_t k = w.cols(), units = Activation::units(k);
  kept.x.resize(std::max(kept.x.size(), static_cast<size_t>(m * units)));
  Activation* act = kept.x.data();
  pool.parallel_for(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) quantize_row(x + i * k, k, kernel.activation_bias, act + i * units);
  });
  kept.job = {act, m, k, units, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias, w.packed};
  kept.range = kernel.range;
  return rows_job(kept, kGrain);
}

#if defined(ORZO_Q8_VNNI)
// The gemv on packed rows of the types other than Q4_K (packed_strip_rows).
template <class F>
constexpr Kernel<ActivationOf<2>> packed_gemv_of() {
  return {packed_strip_rows<F>, kActivationBias<F>};
}
Kernel<ActivationOf<2>> packed_gemv_for(DType t) {
  switch (t) {
    case DType::Q6_K: return packed_gemv_of<Q6_KFormat>();
    case DType::Q4_0: return packed_gemv_of<Q4_0Format>();
    case DType::Q4_1: return packed_gemv_of<Q4_1Format>();
    default: throw std::logic_error("matmul_q16_gemv: no packed gemv for this type");
  }
}
#endif

// What prepare_words keeps for its RowsJob.
struct WordSlot {
  WordRows x;
  Job<WordRows> job;
  void (*range)(const Job<WordRows>&, int64_t, int64_t);
};

// Activation rows against Q4_K weights as words: packed_group where packed (AVX2, at any
// m), else on AVX-512 word_tile on the rows as stored (at most kGemvMaxRows).
RowsJob prepare_words(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                      int slot) {
  if (w.dtype != DType::Q4_K) throw std::logic_error("prepare_words: " + w.name + " is not Q4_K");
  const int64_t k = w.cols();
  thread_local WordSlot slots[kRowsJobSlots];
  WordSlot& kept = slots[slot];  // the caller's: a pool thread naming `slots` would get its own
  kept.x.resize(m, k);
  // A decode's few rows are rounded where the call runs, without waking the pool.
  constexpr int64_t kRoundedAlone = 4;
  pool.parallel_for(m, [&](int64_t begin, int64_t end, int) { quantize_words(x, begin, end, k, kept.x); }, kRoundedAlone);
  kept.job = {&kept.x, m, k, 0, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, k), y, w.rows(), bias, w.packed};
  static_assert(kGrain % kPackedRows == 0, "a thread's range is whole groups");
  if (kept.job.packed) {
    kept.range = packed_rows;
  } else {
#if defined(ORZO_Q8_VNNI)
    static_assert(kGemvMaxRows == 2, "one case per row count");
    kept.range = m == 2 ? word_rows<Q4_KFormat, 2> : word_rows<Q4_KFormat, 1>;
#else
    throw std::logic_error("prepare_words: " + w.name + " is not packed");
#endif
  }
  return rows_job(kept, kGrain);
}

#endif

}  // namespace

bool matmul_q8_supports(DType t) {
#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
  return dtype_is_quantized(t);
#else
  (void)t;
  return false;
#endif
}

void matmul_q8(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
  run_rows(pool, prepare_product<ActivationOf<1>>(x, m, w, y, pool, bias, kernel_for<ActivationOf<1>, false>(w.dtype), 0));
#else
  (void)x, (void)m, (void)y, (void)pool, (void)bias;
  throw std::logic_error("matmul_q8: no integer path for " + w.name + " in this build");
#endif
}

#if defined(ORZO_Q8_VNNI) || defined(ORZO_Q8_AVX2)
void matmul_q16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias) {
  run_rows(pool, prepare_product<ActivationOf<2>>(x, m, w, y, pool, bias, kernel_for<ActivationOf<2>, false>(w.dtype), 0));
}

RowsJob matmul_q16_gemv(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                        int slot) {
  if (m > kGemvMaxRows)
    throw std::logic_error("matmul_q16_gemv: " + std::to_string(m) + " rows, past its " + std::to_string(kGemvMaxRows));
#if defined(ORZO_Q8_VNNI)
  if (w.dtype == DType::Q4_K) return prepare_words(x, m, w, y, pool, bias, slot);
  if (w.packed) return prepare_product<ActivationOf<2>>(x, m, w, y, pool, bias, packed_gemv_for(w.dtype), slot);
#else
  if (w.packed) return prepare_words(x, m, w, y, pool, bias, slot);
#endif
  return prepare_product<GemvActivationOf<2>>(x, m, w, y, pool, bias, kernel_for<GemvActivationOf<2>, true>(w.dtype), slot);
}
#endif

#if defined(ORZO_Q8_AVX2)
RowsJob matmul_packed_words(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                            const float* bias, int slot) {
  if (!w.packed) throw std::logic_error("matmul_packed_words: " + w.name + " is not packed");
  return prepare_words(x, m, w, y, pool, bias, slot);
}
#endif

#undef ORZO_Q8_VNNI
#undef ORZO_Q8_AVX2

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
