#pragma once
// A step's small inputs (token ids, positions, slot mappings, block tables, sampling
// parameters) gathered in pinned host memory and sent to the device in one copy. Arrays are
// laid out one after another in the order they are added, so a step of the same shape puts
// each array at the same device address: what a replayed CUDA graph needs.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace orzo::cuda {

class StagedUpload {
 public:
  // `bytes` of pinned host memory and as many on the current device; `what` names it in errors.
  StagedUpload(size_t bytes, std::string what);
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;

  void reset() { used_ = 0; }
  // Room for `count` elements; returns the host slot to fill and sets `device` to its device twin.
  template <typename T>
  T* add(size_t count, const T*& device) {
    const size_t offset = reserve(count * sizeof(T));
    device = reinterpret_cast<const T*>(device_ + offset);
    return reinterpret_cast<T*>(host_ + offset);
  }
  template <typename T>
  const T* add_copy(const T* data, size_t count) {
    const T* device = nullptr;
    T* host = add(count, device);
    if (count) std::memcpy(host, data, count * sizeof(T));
    return device;
  }
  // Copies what was added to the device, on `stream`; the host side is reusable once the
  // stream has passed this point.
  void flush(cudaStream_t stream);
  size_t capacity() const { return capacity_; }

 private:
  size_t reserve(size_t bytes);

  std::string what_;
  char* host_ = nullptr;
  char* device_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace orzo::cuda
