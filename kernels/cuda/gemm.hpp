#pragma once
// Every projection of a GPU stage as one cuBLAS GEMM over all rows of the step: half inputs
// (bf16 or f16), f32 accumulation and f32 output, optionally added to what the output holds
// (the residual). The handle is bound to one stream and owns a fixed workspace, so that calls
// allocate nothing and may be captured into a CUDA graph.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

class Gemm {
 public:
  Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // y[r, o] = sum_i x[r, i] * w[o, i] (+ y[r, o] when accumulate), for r < rows, o < out.
  // x: [rows, in] of elem; w: [out, in] of elem (a Linear weight, row-major); y: [rows, out] f32.
  void linear(Elem elem, const void* x, int32_t rows, const void* w, int32_t out, int32_t in, float* y,
              bool accumulate) const;

 private:
  void* handle_ = nullptr;  // cublasHandle_t, kept out of this header
};

}  // namespace orzo::cuda
