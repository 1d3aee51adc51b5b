#pragma once
// RMSNorm of f32 rows into the storage type, the input of the next GEMM.
// Twin: cpu::rmsnorm (kernels/cpu/rmsnorm.hpp), then rounding to `elem`.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

// out[i, :] = elem(x[src, :] / sqrt(mean(x[src, :]²) + eps) * weight), src = row_index ? row_index[i] : i,
// for i < rows. The sum of squares is taken in f32. The gathered form picks the rows the LM
// head needs. x: f32 rows of n; weight: n f32; out: [rows, n] of `elem`.
void rmsnorm_rows(Elem elem, const float* x, const float* weight, const int32_t* row_index, int32_t rows,
                  int32_t n, float eps, void* out, cudaStream_t stream);

}  // namespace orzo::cuda
