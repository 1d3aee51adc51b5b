#pragma once
// Token embedding on the GPU: one row of the table per token, widened to the f32 residual
// stream and scaled (Gemma multiplies by sqrt(hidden)). Twin: cpu::dequantize_row of the
// table's row (kernels/cpu/convert.hpp), times the scale in f32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

// x[r, :] = table[tokens[r], :] * scale for r < rows; a negative token (a padding row) gives
// zeros. table: [vocab, hidden] of `elem`; x: [rows, hidden] f32.
void embed_rows(Elem elem, const void* table, const int32_t* tokens, int32_t rows, int32_t hidden, float scale,
                float* x, cudaStream_t stream);

}  // namespace orzo::cuda
