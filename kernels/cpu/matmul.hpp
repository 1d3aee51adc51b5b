#pragma once
// y = x · Wᵀ for a Linear layer whose weight W ([n, k], any DType) stays in its stored
// type: activations are f32 and accumulation is f32.
#include <cstdint>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"

namespace orzo::cpu {

// How weights meet the f32 activations. F32, F16 and BF16 weights are decoded to f32 in
// registers, and the product is exact on the stored weights up to f32 rounding. Block-type
// weights (Q8_0, Q4_K, ...) on a level with VNNI (AVX-512), from 4 rows, meet each
// activation row rounded to two int8 digits per block of 32 (matmul_q8.hpp): integer dot
// products whose only error is that rounding, 2^-16 of the block's largest value, below
// that of rounding x to bf16, at 2-2.5x the f32 kernel's speed at 32 rows and 1.7-1.9x at
// 512. Fewer rows, and other levels (AVX2, portable), take the f32 path.
// Two opt-in roundings of the activations trade precision for the CPU's narrow dot products:
// - int8: for block-type weights, each activation row rounded to one int8 digit per block,
//   about twice as fast again for batches of prompt rows. On SmolLM2-135M Q4_1 it moves
//   perplexity by 0.2% and the top-1 token at 2.3% of positions (tests/runtime/test_perplexity.py).
// - bf16: for BF16 weights, each activation rounded to bf16 (round to nearest even) for
//   AVX-512 BF16's dot product, which does twice the multiply-adds of an f32 FMA: the
//   precision GPUs run bf16 models at. Where the CPU has no such instruction, the f32 path.
// Each of these paths is batch-invariant: a row's result never depends on m. The default
// is not, by rounding only: past the level's crossover (isa.hpp) the f32 path hands the
// product to sgemm, whose blocking depends on m, and block types change to two digits at 4
// rows. batch_invariant keeps one arithmetic at every m (vLLM's batch-invariant mode;
// `--batch-invariant`): two digits for block types where the level has them, even for
// one row, and the direct kernel for the rest, at sgemm's advantage for large prompt chunks.
struct MatmulOptions {
  bool int8_activations = false;
  bool bf16_activations = false;
  bool batch_invariant = false;
};

// Below this many rows the f32 kernel's decode in registers beats the two digits' decode
// and transpose of whole strips: on an Emerald Rapids SmolLM2-135M Q4_1 decoded one sequence
// at 0.83x the f32 path's speed on two digits, and the small Q4_K_M shape four at 1.2x
// (docs/BENCHMARKS.md).
constexpr int64_t kTwoDigitsFromRows = 4;

// x: [m, k] row-major f32, y: [m, n] row-major f32; bias (may be null): [n] f32.
void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
            const float* bias = nullptr, MatmulOptions options = {});

}  // namespace orzo::cpu
