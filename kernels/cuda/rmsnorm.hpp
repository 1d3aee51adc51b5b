#pragma once
// RMSNorm of f32 rows: into the storage type, the input of the next GEMM, or added to the
// residual stream (Gemma's norm of each block's output). Twin: cpu::rmsnorm
// (kernels/cpu/rmsnorm.hpp), then rounding to `elem`, or the sum.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

// out[i, :] = elem(x[src, :] / sqrt(mean(x[src, :]²) + eps) * weight), src = row_index ? row_index[i] : i,
// for i < rows. The sum of squares is taken in f32. The gathered form picks the rows the LM
// head needs. x: f32 rows of n; weight: n f32; out: [rows, n] of `elem`.
void rmsnorm_rows(Elem elem, const float* x, const float* weight, const int32_t* row_index, int32_t rows,
                  int32_t n, float eps, void* out, cudaStream_t stream);

// x[i, :] += y[i, :] / sqrt(mean(y[i, :]²) + eps) * weight for i < rows, in f32. x and y:
// [rows, n] f32, apart; weight: n f32.
void rmsnorm_add_rows(const float* y, const float* weight, int32_t rows, int32_t n, float eps, float* x,
                      cudaStream_t stream);

}  // namespace orzo::cuda
