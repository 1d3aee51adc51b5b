#pragma once
// The arithmetic of the CPU's products (matmul.hpp), as the engine's stages choose it: plain
// flags, so that the API (stages/stage_factory.hpp's StageOptions) carries them without the
// kernels.

namespace orzo::cpu {

// How weights meet the f32 activations. F32, F16 and BF16 weights are decoded to f32 in
// registers, and the product is exact on the stored weights up to f32 rounding. Block-type
// weights (Q8_0, Q4_K, ...) on the AVX2 and AVX-512 levels meet each activation row
// rounded to two int8 digits per block of 32 (matmul_q8.hpp): integer dot products whose
// only error is that rounding, 2^-16 of the block's largest value, below that of rounding
// x to bf16. On AVX-512 VNNI that ran 2-2.5x the f32 kernel's speed at 32 rows, 1.7-1.9x
// at 512 and 1.0-2.3x at one (matmul_q16_gemv; Emerald Rapids and Zen 5); on AVX2 (Zen 3)
// 1.0-2.1x at 32 rows and 0.8-1.9x at one, and past the level's q16_max_bytes (isa.hpp)
// sgemm leads, as for float weights. There Q4_K rows the backend packed meet the two
// digits as one 16-bit word at every m (matmul_packed_words): the gemv's arithmetic for
// every row, 1.2-1.3x the strips at 4 rows, 1.05x at 32 and 1.04-1.1x at 512, where it
// is 1.18x sgemm (Emerald Rapids at the avx2 level, one thread). The portable level takes
// the f32 path.
// Two opt-in roundings of the activations trade precision for the CPU's narrow dot products:
// - int8: for block-type weights, each activation row rounded to one int8 digit per block,
//   about twice as fast again for batches of prompt rows. On SmolLM2-135M Q4_1 it moves
//   perplexity by 0.2% and the top-1 token at 2.3% of positions (tests/runtime/test_perplexity.py).
// - bf16: for BF16 weights, each activation rounded to bf16 (round to nearest even) for
//   AVX-512 BF16's dot product, which does twice the multiply-adds of an f32 FMA: the
//   precision GPUs, PyTorch and llama.cpp run bf16 models at. Where the CPU has no such
//   instruction, the f32 path. The engine's stages take it by default (StageOptions;
//   `--f32-activations` opts out): on a Zen 4 it doubled a 512-token prompt of BF16
//   weights, which the f32 path cannot bring past llama.cpp's, and left decode as it was.
//   Where the CPU has AMX tiles (the avx512-amx level), products of many rows run on them:
//   the same bf16 pairs, summed in f32 in another order; and there, from 32 rows, so do
//   F16 weights, each as two bf16 terms (exact), and block types, decoded and rounded to
//   bf16: 2^-9 of each weight, far below a 4- or 6-bit code's step, and the precision at
//   which GPU engines run such files for prompts. On an Emerald Rapids that is 1.9-2.8x two
//   digits' speed at 512 rows and 1.25-1.65x at 32 (isa/kernel_table.cpp).
// - int8 batches: without AMX tiles, block types' products of many rows (the level's
//   one_digit_from_rows: 8, so decode steps of 8 sequences; CpuBackend keeps two digits for
//   prompts of fewer than 32 rows) take the int8 path: 1.15-2x two digits' speed, the precision
//   llama.cpp runs them at (a little finer: its digit spans 256 weights, orzo's 32), which
//   moved SmolLM2-135M Q4_1's perplexity by 0.34% (two digits: 0.00%). The engine's stages
//   take it by default (StageOptions; `--no-int8-batches` opts out), but for steps that
//   score a prompt (CpuBackend::forward), whose log-probabilities must be the model's.
// The int8 path is batch-invariant: a row's result never depends on m. The default is not:
// past the level's crossover (isa.hpp) the f32 path hands the product to sgemm, whose
// blocking depends on m, block types move from matmul_q16_gemv to strips at
// kStripsFromRows (but AVX2's packed Q4_K rows, on words at every m), each summing in
// another order, and bf16 activations on AMX tiles and int8 batches round another way from
// the level's tiles_from_rows and one_digit_from_rows.
// batch_invariant keeps one arithmetic at every m (vLLM's batch-invariant mode;
// `--batch-invariant`): strips for block types where the level has two digits, even for
// one row (AVX2's packed Q4_K rows: words), vdpbf16ps for bf16 products, and the direct kernel for the rest, at the
// advantage of sgemm and the tiles for large prompt chunks.
struct MatmulOptions {
  bool int8_activations = false;
  bool bf16_activations = false;
  bool batch_invariant = false;
  bool int8_batches = false;
};

}  // namespace orzo::cpu
