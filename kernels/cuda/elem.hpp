#pragma once
// The storage type of a GPU stage: its weights, the activations that feed GEMMs, and its KV
// cache are all bf16 or all f16 (the checkpoint's own half type; f32 and quantized
// checkpoints become bf16 on upload). Everything that accumulates (the residual stream,
// GEMM outputs, softmax, norms) is f32. Plain C++: host code names the type without CUDA.
#include <cstddef>
#include <cstdint>

namespace orzo::cuda {

enum class Elem : uint8_t { bf16, f16 };

inline constexpr size_t elem_bytes(Elem) { return 2; }
inline const char* elem_name(Elem e) { return e == Elem::bf16 ? "bf16" : "f16"; }

}  // namespace orzo::cuda
