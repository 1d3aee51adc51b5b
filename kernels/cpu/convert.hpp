#pragma once
// Row conversions between stored weight types and f32. Every matmul, the embedding
// lookup and the GGUF writer go through these, so each dtype is decoded in one place.
#include <cstdint>

#include "core/dtype.hpp"

namespace orzo::cpu {

// dst[0..n) = the n elements of one row stored as `t` at src.
void dequantize_row(DType t, const void* src, int64_t n, float* dst);

// The inverse: stores n f32 values as `t` (the block types through quantize.hpp).
void quantize_row(DType t, const float* src, int64_t n, void* dst);

}  // namespace orzo::cpu
