#pragma once
// CUDA runtime errors as exceptions, for host code. A failed call names what was being
// done; the CUDA message says why.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace orzo::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(status));
}

// After a kernel launch: a bad launch configuration shows here, not at the launch.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace orzo::cuda
