#include "kernels/cpu/rope.hpp"

#include <algorithm>
#include <cmath>

namespace orzo::cpu {

void rope_angles(const float* inv_freq, int64_t half, int32_t position, float* cos_sin, float scale) {
  for (int64_t i = 0; i < half; ++i) {
    // The angle is rounded to f32 before cos/sin, as transformers does.
    const float angle = static_cast<float>(position) * inv_freq[i];
    cos_sin[2 * i] = std::cos(angle) * scale;
    cos_sin[2 * i + 1] = std::sin(angle) * scale;
  }
}

void apply_rope(float* heads, int64_t num_heads, int64_t head_dim, const float* cos_sin, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = heads + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * c - x1 * s;
      v[i + half] = x1 * c + x0 * s;
    }
  }
}

void deinterleave_heads(float* heads, int64_t num_heads, int64_t head_dim, float* scratch) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = heads + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      scratch[i] = v[2 * i];
      scratch[i + half] = v[2 * i + 1];
    }
    std::copy(scratch, scratch + head_dim, v);
  }
}

}  // namespace orzo::cpu
