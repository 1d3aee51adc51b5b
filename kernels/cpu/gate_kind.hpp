#pragma once
// Which activation gates a gated FFN: SiLU (Llama and most), or GELU in its tanh form (Gemma).
#include <cstdint>

namespace orzo::cpu {

enum class GateKind : uint8_t { silu, gelu_tanh };

}  // namespace orzo::cpu
