#pragma once
// Element types of stored weights and the scalar conversions between them.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace orzo {

enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_0 };

// GGML block quantization: 32 weights share one f16 scale.
inline constexpr int64_t kQuantBlock = 32;
struct BlockQ8_0 { uint16_t scale; int8_t q[kQuantBlock]; };
struct BlockQ4_0 { uint16_t scale; uint8_t q[kQuantBlock / 2]; };  // low nibbles: 0..15, high: 16..31
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18, "GGML block layout");

const char* dtype_name(DType t);
bool dtype_is_quantized(DType t);
// Bytes of one row of n elements; quantized rows need n % kQuantBlock == 0.
size_t dtype_row_bytes(DType t, int64_t n);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace orzo
