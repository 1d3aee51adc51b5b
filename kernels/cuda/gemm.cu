#include "kernels/cuda/gemm.hpp"

#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw CudaError(std::string(what) + ": " + cublasGetStatusString(status));
}

cudaDataType_t cuda_type(Elem e) { return e == Elem::bf16 ? CUDA_R_16BF : CUDA_R_16F; }

}  // namespace

Gemm::Gemm(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  try {
    check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
    // After cublasSetStream, which resets the handle to cuBLAS's own workspace pool: with a
    // workspace of ours no call allocates, which a CUDA graph capture requires.
    check_cublas(cublasSetWorkspace(handle, workspace, workspace_bytes), "cublasSetWorkspace");
    // Tensor cores for the half inputs, accumulating in the f32 compute type of linear().
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  handle_ = handle;
}

Gemm::~Gemm() { cublasDestroy(static_cast<cublasHandle_t>(handle_)); }

void Gemm::linear(Elem elem, const void* x, int32_t rows, const void* w, int32_t out, int32_t in, float* y,
                  bool accumulate) const {
  if (rows < 0 || out < 0 || in <= 0)
    throw std::invalid_argument("Gemm::linear: bad shape (rows " + std::to_string(rows) + ", out " +
                                std::to_string(out) + ", in " + std::to_string(in) + "; in must be positive)");
  if (rows == 0 || out == 0) return;
  // cuBLAS is column-major: row-major y [rows, out] is column-major [out, rows], so it computes
  // yᵀ = w · xᵀ with w's row-major [out, in] read transposed and x's row-major [rows, in] as is.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cudaDataType_t t = cuda_type(elem);
  check_cublas(cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha,
                            w, t, in, x, t, in, &beta, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

}  // namespace orzo::cuda
