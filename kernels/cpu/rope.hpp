#pragma once
// Rotary position embedding applied in place to every head of one token's q or k, in HF's
// half-split convention: element i rotates with element i + rotary_dim/2.
#include <cstdint>

namespace orzo::cpu {

// cos_sin: `half` (cos, sin) pairs for this token's position, each times `scale` (LongRope's
// attention factor: transformers scales cos and sin, not the scores; 1 changes nothing).
void rope_angles(const float* inv_freq, int64_t half, int32_t position, float* cos_sin, float scale = 1.0f);
// Rotates the first rotary_dim elements of each head (Phi-4-mini: 3/4 of head_dim, the rest
// pass through as they are); cos_sin holds rotary_dim/2 pairs.
void apply_rope(float* heads, int64_t num_heads, int64_t head_dim, const float* cos_sin, int64_t rotary_dim);

// Reorders each head from llama.cpp's interleaved pairs (2i, 2i+1) to half-split pairs
// (i, i + head_dim/2). Done on q/k right after the projection, it makes a GGUF model's
// attention bit-identical to the HF checkpoint it was converted from. `scratch` holds head_dim floats.
void deinterleave_heads(float* heads, int64_t num_heads, int64_t head_dim, float* scratch);

}  // namespace orzo::cpu
