#pragma once
// A bias added to every row of an f32 GEMM output (o_proj of Llama's attention_bias, whose
// GEMM has already added the residual).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace orzo::cuda {

// x[r, :] += bias for r < rows; x: [rows, n] f32, bias: n f32.
void add_bias_rows(float* x, const float* bias, int32_t rows, int32_t n, cudaStream_t stream);

}  // namespace orzo::cuda
