#pragma once
// Plain C++ face of the CUDA devices: no CUDA or CAF types cross this header, so any
// translation unit may include it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace orzo::cuda {

// True when a usable GPU is present; otherwise `why` says what is missing (no driver, no device).
bool gpu_available(std::string* why);

int device_count();  // 0 where there is no driver or no device

struct DeviceProperties {
  std::string name;
  int sm_count = 0;
  int major = 0, minor = 0;        // compute capability
  size_t total_bytes = 0;
  size_t free_bytes = 0;           // at the time of the call
  double memory_bandwidth = 0;     // bytes per second, from the memory clock and bus width
};

// Throws CudaError naming `device` when it does not exist.
DeviceProperties device_properties(int device);

}  // namespace orzo::cuda
