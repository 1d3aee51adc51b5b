#pragma once
// The FFN's gate: SwiGLU (silu, Llama and most others) or GeGLU with the tanh-approximated
// GELU (Gemma's gelu_pytorch_tanh). A model's (ModelConfig::activation), and what the CPU and
// CUDA kernels of the gated activation take.
#include <cstdint>

namespace orzo {

enum class GateActivation : uint8_t { silu, gelu_tanh };

}  // namespace orzo
