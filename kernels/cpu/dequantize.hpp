#pragma once
// The reference decoding of GGML's quantized blocks to f32: bit-exact with the `gguf`
// Python package (gguf.quants), which follows ggml's reference code. The embedding lookup,
// the CUDA upload and every tool read weights through it; the fast matmul kernels decode
// blocks on their own and are tested against it.
#include <cstdint>

#include "core/dtype.hpp"

namespace orzo::cpu {

// dst[0..n) = the n weights of one row of blocks of quantized type t; n is a whole number
// of blocks (the caller checks).
void dequantize_blocks(DType t, const uint8_t* src, int64_t n, float* dst);

}  // namespace orzo::cpu
