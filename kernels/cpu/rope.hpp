#pragma once
// Rotary position embedding applied in place to every head of one token's q or k, in HF's
// half-split convention: element i rotates with element i + head_dim/2.
#include <cstdint>

namespace orzo::cpu {

// cos_sin: head_dim/2 (cos, sin) pairs for this token's position.
void rope_angles(const float* inv_freq, int64_t half, int32_t position, float* cos_sin);
void apply_rope(float* heads, int64_t num_heads, int64_t head_dim, const float* cos_sin);

// Reorders each head from llama.cpp's interleaved pairs (2i, 2i+1) to half-split pairs
// (i, i + head_dim/2). Done on q/k right after the projection, it makes a GGUF model's
// attention bit-identical to the HF checkpoint it was converted from. `scratch` holds head_dim floats.
void deinterleave_heads(float* heads, int64_t num_heads, int64_t head_dim, float* scratch);

}  // namespace orzo::cpu
