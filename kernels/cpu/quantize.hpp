#pragma once
// Encoding f32 weights as GGML's quantized blocks: the inverse of dequantize.hpp.
//
// Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 round exactly as the `gguf` Python package (gguf.quants)
// and ggml's reference quantizers do, byte for byte. The K-quants and IQ4 types have no
// reference encoder to match: each searches its scales as ggml's reference does (a grid of
// candidate scales around the block's extreme, each refit by least squares, the best kept)
// and then rounds every weight against the scales exactly as stored (f16 super-scales, 4-
// or 6-bit sub-scales), so what a reader decodes is what the search measured.
#include <cstdint>

#include "core/dtype.hpp"

namespace orzo::cpu {

// dst = the n weights of src as blocks of quantized type t; n is a whole number of blocks
// (the caller checks). Every finite input gives finite scales; an all-zero block decodes
// to zeros.
void quantize_blocks(DType t, const float* src, int64_t n, uint8_t* dst);

}  // namespace orzo::cpu
