#pragma once
// Device memory handed out from one allocation made at start, so that nothing on the step
// path calls cudaMalloc. A stage lays out its buffers twice with the same code: first into a
// measuring arena, which only counts, then into the real one, allocated to that size. Running
// out is a clear error that names the device, what the memory is for, and the bytes wanted.
#include <cstddef>
#include <cstdint>
#include <string>

namespace orzo::cuda {

class DeviceArena {
 public:
  static constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees, and tensor cores like

  // Counts what take() would hand out; hands out null pointers.
  static DeviceArena measuring();
  // `bytes` on `device` (made current by the caller) for `purpose`; throws CudaError
  // "cuda:N: out of memory: <purpose> needs <bytes> bytes, <free> of <total> free".
  DeviceArena(int device, size_t bytes, const std::string& purpose);
  ~DeviceArena();
  DeviceArena(DeviceArena&& other) noexcept;
  DeviceArena& operator=(DeviceArena&& other) noexcept;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  template <typename T>
  T* take(size_t count) {
    return static_cast<T*>(take_bytes(count * sizeof(T)));
  }
  void* take_bytes(size_t bytes);

  size_t used() const { return used_; }
  void* base() const { return base_; }

 private:
  DeviceArena() = default;

  char* base_ = nullptr;  // null while measuring
  size_t capacity_ = 0;
  size_t used_ = 0;
};

// "cuda:N: out of memory: ..." when `bytes` more cannot fit on the current device.
[[noreturn]] void throw_out_of_memory(int device, size_t bytes, const std::string& purpose);

}  // namespace orzo::cuda
