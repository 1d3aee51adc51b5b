// The CUDA emulator's runtime (kernels/cuda_cpu/): stream order and the latest schedule CUDA
// allows, graph capture and replay, copies checked against where their pointers live, and
// cuBLAS's column-major product with its argument checks.
#include <gtest/gtest.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/support/cuda_harness.hpp"

namespace orzo {
namespace {

using test::DeviceBuffer;

class Pinned {
 public:
  explicit Pinned(size_t bytes) { EXPECT_EQ(cudaMallocHost(&p_, bytes), cudaSuccess); }
  ~Pinned() { cudaFreeHost(p_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p_); }

 private:
  void* p_ = nullptr;
};

class Stream {
 public:
  explicit Stream(unsigned flags = cudaStreamNonBlocking) { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, flags), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

bool all_bytes(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v) return false;
  return true;
}

constexpr size_t kBytes = 4096;

TEST(CudaCpuStreams, WorkWaitsUntilTheHostWaitsForIt) {
  DeviceBuffer<unsigned char> d(kBytes);
  Pinned h(kBytes);
  Stream s;
  std::memset(h.get(), 1, kBytes);
  ASSERT_EQ(cudaMemsetAsync(d.get(), 7, kBytes, s.get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(h.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
  EXPECT_TRUE(all_bytes(h.get(), kBytes, 1)) << "a pinned result is not there before the host waits";
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  EXPECT_TRUE(all_bytes(h.get(), kBytes, 7));
}

TEST(CudaCpuStreams, PageableCopiesTakeAndGiveTheirBytesAtTheCall) {
  DeviceBuffer<unsigned char> d(kBytes);
  Stream s;
  std::vector<unsigned char> source(kBytes, 3), result(kBytes, 0);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), source.data(), kBytes, cudaMemcpyHostToDevice, s.get()), cudaSuccess);
  std::fill(source.begin(), source.end(), 4);  // too late: the copy took its bytes at the call
  ASSERT_EQ(cudaMemcpyAsync(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 3)) << "a copy to pageable memory is done when the call returns";
}

TEST(CudaCpuStreams, PinnedInputsAreReadWhenTheCopyRuns) {
  DeviceBuffer<unsigned char> d(kBytes);
  Pinned h(kBytes);
  Stream s;
  std::memset(h.get(), 3, kBytes);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), h.get(), kBytes, cudaMemcpyHostToDevice, s.get()), cudaSuccess);
  std::memset(h.get(), 4, kBytes);  // reused before the stream ran: the copy sees this
  std::vector<unsigned char> result(kBytes);
  ASSERT_EQ(cudaMemcpyAsync(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 4));
}

TEST(CudaCpuStreams, ANonBlockingStreamIsNotOrderedWithTheLegacyStream) {
  DeviceBuffer<unsigned char> d(kBytes);
  Stream blocking(cudaStreamDefault), non_blocking(cudaStreamNonBlocking);
  std::vector<unsigned char> result(kBytes);
  ASSERT_EQ(cudaMemsetAsync(d.get(), 5, kBytes, blocking.get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 5)) << "a blocking stream is ordered with the legacy stream";
  ASSERT_EQ(cudaMemsetAsync(d.get(), 6, kBytes, non_blocking.get()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 5)) << "a non-blocking stream's work may still be pending";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 6));
}

TEST(CudaCpuGraphs, ACaptureRecordsAndEachLaunchReplays) {
  DeviceBuffer<unsigned char> a(kBytes), b(kBytes);
  Stream s;
  ASSERT_EQ(cudaMemsetAsync(a.get(), 1, kBytes, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(b.get(), a.get(), kBytes, cudaMemcpyDeviceToDevice, s.get()), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s.get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> result = b.download();
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 0xff)) << "captured work does not run";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  result = b.download();
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 1));
  // A replay reads the memory as it is now, through the pointers of the capture.
  ASSERT_EQ(cudaMemsetAsync(a.get(), 2, kBytes, s.get()), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  result = b.download();
  EXPECT_TRUE(all_bytes(result.data(), kBytes, 2));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(CudaCpuGraphs, ACallThatWaitsInvalidatesTheCapture) {
  DeviceBuffer<unsigned char> d(kBytes);
  Stream s;
  std::vector<unsigned char> result(kBytes);
  ASSERT_EQ(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(result.data(), d.get(), kBytes, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(s.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(s.get(), &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported)
      << "the legacy stream cannot be captured";
  cudaGetLastError();
}

TEST(CudaCpuMemory, CopiesAreCheckedAgainstWhereTheirPointersLive) {
  DeviceBuffer<unsigned char> d(kBytes);
  std::vector<unsigned char> host(2 * kBytes);
  EXPECT_EQ(cudaMemcpy(host.data(), d.get(), kBytes, cudaMemcpyHostToDevice), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), kBytes, cudaMemcpyDeviceToHost), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), kBytes + 1, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "past the end of the allocation";
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 16), cudaErrorInvalidValue) << "memset is for device memory";
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevicePointer) << "the last error is the latest failure";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<unsigned char> fresh = d.download();
  EXPECT_TRUE(all_bytes(fresh.data(), kBytes, 0xff)) << "new device memory holds poison, not zeros";
}

// cuBLAS: C = alpha op(A) op(B) + beta C, column-major, against the definition.
class CudaCpuCublas : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { cublasDestroy(handle_); }
  cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
    const float alpha = 2.0f;
    return cublasGemmEx(handle_, ta, tb, m, n, k, &alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, &beta, c, CUDA_R_32F,
                        ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  cublasHandle_t handle_ = nullptr;
};

TEST_F(CudaCpuCublas, GemmIsColumnMajorWithLeadingDimensions) {
  constexpr int m = 3, n = 2, k = 4, lda = 5, ldb = 3, ldc = 4;  // A stored k x m (transposed), padded
  std::vector<float> a(static_cast<size_t>(lda * m)), b(static_cast<size_t>(ldb * k)), c(static_cast<size_t>(ldc * n), 1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
  DeviceBuffer<float> da(a), db(b), dc(c);
  // op(A) = A^T (A stored k x m with lda), op(B) = B^T (B stored n x k with ldb).
  ASSERT_EQ(gemm(CUBLAS_OP_T, CUBLAS_OP_T, m, n, k, da.get(), lda, db.get(), ldb, 0.5f, dc.get(), ldc),
            CUBLAS_STATUS_SUCCESS);
  const auto got = dc.download();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < ldc; ++i) {
      if (i >= m) {
        EXPECT_EQ(got[static_cast<size_t>(i + j * ldc)], 1.0f) << "the padding of C is not written";
        continue;
      }
      float sum = 0.0f;
      for (int l = 0; l < k; ++l) sum += a[static_cast<size_t>(l + i * lda)] * b[static_cast<size_t>(j + l * ldb)];
      EXPECT_FLOAT_EQ(got[static_cast<size_t>(i + j * ldc)], 2.0f * sum + 0.5f) << i << "," << j;
    }
}

TEST_F(CudaCpuCublas, LeadingDimensionsAndExtentsAreChecked) {
  DeviceBuffer<float> a(64), b(64), c(64);
  EXPECT_EQ(gemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, a.get(), 3, b.get(), 4, 0.0f, c.get(), 4), CUBLAS_STATUS_INVALID_VALUE)
      << "lda below the height of A";
  EXPECT_EQ(gemm(CUBLAS_OP_T, CUBLAS_OP_N, 4, 4, 8, a.get(), 4, b.get(), 8, 0.0f, c.get(), 4), CUBLAS_STATUS_INVALID_VALUE)
      << "a transposed A is k high";
  EXPECT_EQ(gemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, a.get(), 4, b.get(), 20, 0.0f, c.get(), 4), CUBLAS_STATUS_SUCCESS)
      << "B with ldb 20 ends at its 64th float";
  EXPECT_EQ(gemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, a.get(), 4, b.get(), 21, 0.0f, c.get(), 4), CUBLAS_STATUS_INVALID_VALUE)
      << "B with ldb 21 runs past its 64 floats";
  std::vector<float> host(64);
  EXPECT_EQ(gemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, host.data(), 4, b.get(), 4, 0.0f, c.get(), 4),
            CUBLAS_STATUS_INVALID_VALUE)
      << "a host pointer";
}

TEST_F(CudaCpuCublas, TheProductRunsInItsStream) {
  DeviceBuffer<float> a(std::vector<float>(4, 1.0f)), b(std::vector<float>(4, 1.0f)), c(4);
  Stream s;
  ASSERT_EQ(cublasSetStream(handle_, s.get()), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(gemm(CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, a.get(), 2, b.get(), 2, 0.0f, c.get(), 2), CUBLAS_STATUS_SUCCESS);
  std::vector<float> result(4);
  ASSERT_EQ(cudaMemcpy(result.data(), c.get(), sizeof(float) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(result[0])) << "not yet run: the legacy stream does not wait for a non-blocking one";
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  EXPECT_EQ(c.download(), std::vector<float>(4, 4.0f));
}

}  // namespace
}  // namespace orzo
