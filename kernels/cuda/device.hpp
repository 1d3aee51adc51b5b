#pragma once
// Plain C++ face of the CUDA kernels: no CUDA or CAF types cross this header, so any
// translation unit may include it and only .cu files see the CUDA toolkit.
#include <cstdint>
#include <string>

namespace orzo::cuda {

// True when a usable GPU is present; otherwise `why` says what is missing.
bool gpu_available(std::string* why);

// RMSNorm of `rows` rows of n floats on the GPU, host buffers in and out (the twin of
// kernels/cpu/rmsnorm.hpp, used by the test that compares the two).
void rmsnorm_rows(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* out);

}  // namespace orzo::cuda
