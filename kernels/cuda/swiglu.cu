#include "kernels/cuda/swiglu.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// silu(g) = g / (1 + e^-g), and gelu_tanh(g) = 0.5 g (1 + tanh(z)) = g / (1 + e^-2z) with
// z = sqrt(2/pi) (g + 0.044715 g^3): one form with another exponent. The exponent is capped
// where its exponential would overflow f32 (above about 88), as the CPU twins cap it: the
// denominator stays finite, so a very negative g gives a tiny product rather than g / inf,
// and g = -inf gives -inf * up rather than NaN. The activation is the same for the whole
// grid, so the branch never splits a warp.
__device__ __forceinline__ float activate(GateActivation act, float g) {
  constexpr float kSqrt2OverPi = 0.797884560802865356f;
  const float exponent = act == GateActivation::silu ? -g : -2.0f * kSqrt2OverPi * (g + 0.044715f * g * g * g);
  return g / (1.0f + expf(fminf(exponent, 87.0f)));
}

template <typename T>
__global__ void swiglu_kernel(GateActivation act, const float* gate_up, int32_t inter, int64_t total, T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / inter, col = i % inter;
    const float* g = gate_up + row * 2 * inter;
    out[i] = from_f32<T>(activate(act, g[col]) * g[inter + col]);
  }
}

}  // namespace

void swiglu_rows(Elem elem, GateActivation act, const float* gate_up, int32_t rows, int32_t inter, void* out,
                 cudaStream_t stream) {
  if (rows < 0 || inter < 0)
    throw std::invalid_argument("swiglu_rows: negative shape (rows " + std::to_string(rows) + ", inter " +
                                std::to_string(inter) + ")");
  const int64_t total = static_cast<int64_t>(rows) * inter;
  if (total == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  dispatch_elem(elem, [&](auto zero) {
    using T = decltype(zero);
    swiglu_kernel<T><<<blocks, kThreads, 0, stream>>>(act, gate_up, inter, total, static_cast<T*>(out));
  });
  check_launch("swiglu_rows");
}

}  // namespace orzo::cuda
