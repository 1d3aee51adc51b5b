#include "runtime/cuda/staged_upload.hpp"

#include <stdexcept>
#include <utility>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {

namespace {
constexpr size_t kAlignment = 16;  // int4 / float4 loads stay aligned
}

StagedUpload::StagedUpload(size_t bytes, std::string what) : what_(std::move(what)), capacity_(bytes) {
  void* host = nullptr;
  void* device = nullptr;
  check(cudaMallocHost(&host, bytes), (what_ + ": pinned staging").c_str());
  host_ = static_cast<char*>(host);
  if (cudaMalloc(&device, bytes) != cudaSuccess) {
    cudaFreeHost(host_);
    check(cudaGetLastError(), (what_ + ": device staging").c_str());
  }
  device_ = static_cast<char*>(device);
}

StagedUpload::~StagedUpload() {
  cudaFreeHost(host_);
  cudaFree(device_);
}

size_t StagedUpload::reserve(size_t bytes) {
  const size_t offset = used_;
  const size_t end = offset + (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (end > capacity_)
    throw std::invalid_argument(what_ + ": a step needs " + std::to_string(end) + " bytes of inputs, room for " +
                                std::to_string(capacity_));
  used_ = end;
  return offset;
}

void StagedUpload::flush(cudaStream_t stream) {
  if (used_) check(cudaMemcpyAsync(device_, host_, used_, cudaMemcpyHostToDevice, stream), (what_ + ": upload").c_str());
}

}  // namespace orzo::cuda
