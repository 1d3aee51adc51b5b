#include "runtime/cuda/device_arena.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <utility>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {

void throw_out_of_memory(int device, size_t bytes, const std::string& purpose) {
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  cudaGetLastError();
  throw CudaError("cuda:" + std::to_string(device) + ": out of memory: " + purpose + " needs " + std::to_string(bytes) +
                  " bytes, " + std::to_string(free_bytes) + " of " + std::to_string(total) + " free");
}

DeviceArena DeviceArena::measuring() { return DeviceArena(); }

DeviceArena::DeviceArena(int device, size_t bytes, const std::string& purpose) : capacity_(bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    cudaGetLastError();
    throw_out_of_memory(device, bytes, purpose);
  }
  base_ = static_cast<char*>(p);
}

DeviceArena::~DeviceArena() {
  if (base_) cudaFree(base_);
}

DeviceArena::DeviceArena(DeviceArena&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      used_(std::exchange(other.used_, 0)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& other) noexcept {
  if (this != &other) {
    if (base_) cudaFree(base_);
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    used_ = std::exchange(other.used_, 0);
  }
  return *this;
}

void* DeviceArena::take_bytes(size_t bytes) {
  const size_t offset = used_;
  used_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (!base_) return nullptr;
  // The layout is measured first with the same calls, so this is a bug, not a lack of memory.
  if (used_ > capacity_) throw std::logic_error("device arena: laid out beyond what was measured");
  return base_ + offset;
}

}  // namespace orzo::cuda
