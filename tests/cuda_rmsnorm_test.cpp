// The CUDA RMSNorm against its CPU twin. Skips, saying why, where no GPU is present.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/rmsnorm.hpp"

#ifdef ORZO_HAVE_CUDA
#include "kernels/cuda/device.hpp"
#endif

namespace orzo {
namespace {

TEST(CudaKernels, RmsNormMatchesCpuTwin) {
#ifndef ORZO_HAVE_CUDA
  GTEST_SKIP() << "built without ORZO_CUDA";
#else
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  const int64_t rows = 7, n = 2048;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> x(rows * n), w(n), gpu(rows * n), cpu_out(rows * n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = 1.0f + 0.1f * dist(rng);
  cuda::rmsnorm_rows(x.data(), w.data(), rows, n, 1e-5f, gpu.data());
  for (int64_t r = 0; r < rows; ++r) cpu::rmsnorm(x.data() + r * n, w.data(), n, 1e-5, cpu_out.data() + r * n);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(gpu[i], cpu_out[i], 1e-5f * (1.0f + std::abs(cpu_out[i])));
#endif
}

}  // namespace
}  // namespace orzo
