#pragma once
// y = x · Wᵀ for the GGML block types by integer dot products. Each activation row is
// quantized on the fly to blocks of 32 int8 codes with an f32 scale (amax / 127), each
// 32-weight sub-block of W is decoded to its integer codes, and their products are summed
// exactly in int32 before one f32 scale per block and half, so a weight costs a fraction
// of the f32 FMA it costs in matmul_direct. matmul_q16 rounds each activation to a second
// int8 digit too, the remainder in 256ths of a step, for twice the integer products.
//
// A row's result is the same sequence of operations whatever m is and wherever the row
// sits in the batch, so it is bit-identical alone or batched.
//
// Against the f32 product on the dequantized weights the error is that of rounding x: with
// one digit each code is off by at most half a step, amax_b / 254 for block b, so
//   |y - ref| <= sum_b (amax_b / 254) * sum_{j in b} |w_j|
// (plus f32 rounding, far smaller); with two digits by at most amax_b / (127 * 256) (half
// a 256th of a step, or a whole one where a remainder of exactly half a step (on AVX2, past
// 127/256 of one either way) saturates the
// second digit). For a row of random signs the errors add in quadrature instead,
// ~ sqrt(k) * rms(w) * rms(amax_b) / (127 * sqrt(12)) for one digit, 256 times less for two.
#include <cstdint>

#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

// Whether the active ISA level has an integer path for weights of type t (the block types
// on AVX2 and AVX-512 VNNI; elsewhere matmul() keeps every type on the f32 kernels).
inline bool matmul_q8_supports(DType t) { return kernels().matmul_q8_supports(t); }

// matmul() for any m >= 1 and a type matmul_q8_supports, on the active ISA level
// (kernels/cpu/isa/matmul_q8.cpp); the caller has validated shapes.
inline void matmul_q8(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                      const float* bias) {
  kernels().matmul_q8(x, m, w, y, pool, bias);
}

// Whether the active level rounds activations to two digits (AVX2, AVX-512 VNNI): for
// every type matmul_q8_supports, and matmul() does so by default there, up to the level's
// q16_max_bytes of x.
inline bool has_matmul_q16() { return kernels().matmul_q16 != nullptr; }

// matmul_q8 with two digits, where has_matmul_q16().
inline void matmul_q16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                       const float* bias) {
  kernels().matmul_q16(x, m, w, y, pool, bias);
}

// matmul_q16 for m <= kGemvMaxRows (isa.hpp), lanes along k: each weight row decoded as
// stored for the few activation rows of decode, where a strip's transpose would cost as
// much as the products. Its sums run in another order, so its results agree with
// matmul_q16's to f32 rounding, not bit for bit.
inline void matmul_q16_gemv(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                            const float* bias) {
  run_rows(pool, kernels().matmul_q16_gemv(x, m, w, y, pool, bias, 0));
}

}  // namespace orzo::cpu
