#pragma once
// What the GPU tests share: a skip that says why when no GPU is present, device buffers that
// free themselves, and host-side rounding to the storage types for the CPU twins. The same
// tests run on a GPU (orzo_tests) and on the CUDA emulator (orzo_emulated_gpu_tests, built with
// ORZO_CUDA_EMULATED), where kEmulatedGpu lets the largest of them run smaller, saying so.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/elem.hpp"

#define ORZO_REQUIRE_GPU()                                                       \
  do {                                                                           \
    std::string orzo_gpu_why;                                                    \
    if (!::orzo::cuda::gpu_available(&orzo_gpu_why)) GTEST_SKIP() << "no GPU: " << orzo_gpu_why; \
  } while (0)

namespace orzo::test {

#ifdef ORZO_CUDA_EMULATED
inline constexpr bool kEmulatedGpu = true;
#else
inline constexpr bool kEmulatedGpu = false;
#endif

// A device copy of a host vector (or `count` uninitialized elements), freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    cuda::check(cudaMalloc(&ptr_, bytes() ? bytes() : 1), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    cuda::check(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return count_ * sizeof(T); }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    cuda::check(cudaDeviceSynchronize(), "kernel");
    cuda::check(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t count_;
};

// f32 <-> the storage type's 16 bits, as the GPU rounds (to nearest even).
inline uint16_t to_elem(cuda::Elem e, float v) { return e == cuda::Elem::bf16 ? f32_to_bf16(v) : f32_to_f16(v); }
inline float from_elem(cuda::Elem e, uint16_t v) { return e == cuda::Elem::bf16 ? bf16_to_f32(v) : f16_to_f32(v); }
inline std::vector<uint16_t> to_elem(cuda::Elem e, const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_elem(e, v[i]);
  return out;
}
inline std::vector<float> from_elem(cuda::Elem e, const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_elem(e, v[i]);
  return out;
}

}  // namespace orzo::test
