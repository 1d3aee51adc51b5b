#pragma once
// y = x · Wᵀ for a Linear layer whose weight W ([n, k], any DType) stays in its stored
// type: activations are f32 and accumulation is f32.
#include <cstdint>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"

namespace orzo::cpu {

// x: [m, k] row-major f32, y: [m, n] row-major f32; bias (may be null): [n] f32.
void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
            const float* bias = nullptr);

}  // namespace orzo::cpu
