#include "kernels/cuda/device.hpp"

#include <cuda_runtime.h>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {

bool gpu_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) {
      // Without a driver the runtime's message is about versions: say what it means here.
      *why = e == cudaErrorInsufficientDriver ? std::string("no NVIDIA driver (") + cudaGetErrorString(e) + ")"
             : e != cudaSuccess               ? cudaGetErrorString(e)
                                              : "no CUDA device";
    }
    cudaGetLastError();  // a failed query must not surface as the next call's error
    return false;
  }
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceProperties device_properties(int device) {
  const std::string name = "cuda:" + std::to_string(device);
  if (device < 0 || device >= device_count())
    throw CudaError(name + ": no such device (" + std::to_string(device_count()) + " present)");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), name.c_str());
  int clock_khz = 0, bus_bits = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device), name.c_str());
  check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device), name.c_str());
  DeviceProperties out;
  out.name = p.name;
  out.sm_count = p.multiProcessorCount;
  out.major = p.major;
  out.minor = p.minor;
  out.total_bytes = p.totalGlobalMem;
  int previous = 0;
  check(cudaGetDevice(&previous), name.c_str());
  check(cudaSetDevice(device), name.c_str());
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), name.c_str());
  check(cudaSetDevice(previous), name.c_str());
  out.free_bytes = free_bytes;
  // Double data rate: two transfers per clock on each bit of the bus.
  out.memory_bandwidth = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
  return out;
}

}  // namespace orzo::cuda
