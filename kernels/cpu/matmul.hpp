#pragma once
// y = x · Wᵀ for a Linear layer whose weight W ([n, k], any DType) stays in its stored
// type: activations are f32 and accumulation is f32.
#include <cstdint>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"

namespace orzo::cpu {

// How a block-type weight (Q8_0, Q4_K, ...) meets the f32 activations. F32: decoded to f32
// in registers, the product exact on the dequantized weights up to f32 rounding. Int8:
// each activation row rounded to int8 blocks of 32 for integer dot products
// (matmul_q8.hpp states the error), 2-3x faster for batches of prompt rows, about even for
// decode. On SmolLM2-135M Q4_1, Int8 moves perplexity by 0.2% and the top-1 token at 3% of
// positions (tests/runtime/test_perplexity.py). Both are batch-invariant: a row's result
// never depends on m. The float types ignore it.
enum class Activations { F32, Int8 };

// x: [m, k] row-major f32, y: [m, n] row-major f32; bias (may be null): [n] f32.
void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
            const float* bias = nullptr, Activations activations = Activations::F32);

}  // namespace orzo::cpu
