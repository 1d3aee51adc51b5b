#pragma once
// The prefill-sized product: compute bound, so it runs on OpenBLAS. Each pool thread owns
// a slice of the weight rows, widens it to f32 a tile at a time into its own scratch, and
// multiplies the tile with a single-threaded sgemm.
#include <cstdint>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"

namespace orzo::cpu {

// matmul() for any m >= 1; the caller has validated the shapes.
void matmul_blas(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                 const float* bias);

}  // namespace orzo::cpu
