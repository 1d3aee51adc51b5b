#pragma once
// Gemma 2's soft cap of the final logits, which bounds them smoothly to (-cap, cap). Twin:
// CpuBackend's LM head, x / cap then cpu::scaled_tanh_inplace (kernels/cpu/tanh.hpp).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace orzo::cuda {

// x[r, :] = cap * tanh(x[r, :] / cap) for r < rows; x: [rows, n] f32, cap > 0.
void softcap_rows(float* x, int32_t rows, int32_t n, float cap, cudaStream_t stream);

}  // namespace orzo::cuda
