// cuBLAS on the CPU emulator: the handle state that matters to orzo (its stream, and that
// cublasSetStream drops a workspace set before it, as cuBLAS documents) and cublasGemmEx as a
// column-major product in f32, queued on the handle's stream. Its arguments are checked as
// cuBLAS checks them (leading dimensions against the matrix heights), and every matrix the
// call reads or writes must lie inside one device allocation, so a wrong leading dimension or
// transpose fails here instead of reading a neighbour's bytes.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda_cpu/include/half_bits.h"
#include "kernels/cuda_cpu/runtime_state.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace orzo::cuda_cpu {
namespace {

size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
bool known_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

float load(const void* base, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(base)[i];
  const uint16_t bits = static_cast<const uint16_t*>(base)[i];
  return t == CUDA_R_16F ? f16_to_f32(bits) : bf16_to_f32(bits);
}

void store(void* base, cudaDataType_t t, int64_t i, float v) {
  if (t == CUDA_R_32F)
    static_cast<float*>(base)[i] = v;
  else
    static_cast<uint16_t*>(base)[i] = t == CUDA_R_16F ? f32_to_f16_rn(v) : f32_to_bf16_rn(v);
}

// A column-major rows x cols matrix with leading dimension ld lies inside one device allocation.
bool matrix_on_device(const void* p, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return true;
  bool inside = true;
  const auto bytes = static_cast<size_t>((ld * (cols - 1) + rows) * static_cast<int64_t>(type_bytes(t)));
  return memory_at(p, bytes, &inside) == Memory::device && inside;
}

struct Gemm {
  bool a_t, b_t;
  int m, n, k;
  float alpha, beta;
  const void* a;
  cudaDataType_t at;
  int lda;
  const void* b;
  cudaDataType_t bt;
  int ldb;
  void* c;
  cudaDataType_t ct;
  int ldc;

  // op(A) is m x k, op(B) k x n. Each op(A) row and op(B) column is gathered once into f32.
  void run() const {
    std::vector<float> a_rows(static_cast<size_t>(m) * static_cast<size_t>(k)), b_col(static_cast<size_t>(k));
    for (int i = 0; i < m; ++i)
      for (int l = 0; l < k; ++l)
        a_rows[static_cast<size_t>(i) * static_cast<size_t>(k) + static_cast<size_t>(l)] =
            load(a, at, a_t ? int64_t{l} + int64_t{i} * lda : int64_t{i} + int64_t{l} * lda);
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l)
        b_col[static_cast<size_t>(l)] = load(b, bt, b_t ? int64_t{j} + int64_t{l} * ldb : int64_t{l} + int64_t{j} * ldb);
      for (int i = 0; i < m; ++i) {
        const float* row = a_rows.data() + static_cast<size_t>(i) * static_cast<size_t>(k);
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) sum += row[l] * b_col[static_cast<size_t>(l)];
        const int64_t at_c = int64_t{i} + int64_t{j} * ldc;
        // beta == 0: C is not read, so whatever it held (NaN too) is overwritten.
        store(c, ct, at_c, beta == 0.0f ? alpha * sum : alpha * sum + beta * load(c, ct, at_c));
      }
    }
  }
};

}  // namespace
}  // namespace orzo::cuda_cpu

using namespace orzo::cuda_cpu;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  handle->workspace = nullptr;  // back to cuBLAS's own pool
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  bool inside = true;
  if (bytes > 0 && (memory_at(workspace, bytes, &inside) != Memory::device || !inside))
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown cuBLAS status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* a, cudaDataType_t a_type, int lda, const void* b,
                            cudaDataType_t b_type, int ldb, const void* beta, void* c, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (transa == CUBLAS_OP_C || transb == CUBLAS_OP_C || compute != CUBLAS_COMPUTE_32F || !known_type(a_type) ||
      !known_type(b_type) || !known_type(c_type) || a_type != b_type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool a_t = transa == CUBLAS_OP_T, b_t = transb == CUBLAS_OP_T;
  // cuBLAS's own checks: A is stored m x k (k x m transposed), B k x n (n x k), C m x n.
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_t ? k : m) || ldb < std::max(1, b_t ? n : k) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  float alpha_v, beta_v;
  std::memcpy(&alpha_v, alpha, sizeof alpha_v);
  std::memcpy(&beta_v, beta, sizeof beta_v);
  if (!matrix_on_device(a, a_type, a_t ? k : m, a_t ? m : k, lda) ||
      !matrix_on_device(b, b_type, b_t ? n : k, b_t ? k : n, ldb) || !matrix_on_device(c, c_type, m, n, ldc))
    return CUBLAS_STATUS_INVALID_VALUE;
  const Gemm g{a_t, b_t, m, n, k, alpha_v, beta_v, a, a_type, lda, b, b_type, ldb, c, c_type, ldc};
  enqueue(handle->stream, [g] {
    g.run();
    return std::string();
  });
  return CUBLAS_STATUS_SUCCESS;
}
