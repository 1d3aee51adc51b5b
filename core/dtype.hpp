#pragma once
// Element types of stored weights and the scalar conversions between them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace orzo {

// The float types, then GGML's block quantizations in the order of their GGML type ids.
// The _0/_1/IQ4_NL blocks hold 32 weights; the K-quants and IQ4_XS hold 256 (a "super-block"
// of 8 or 16 sub-blocks with their own scales). Layouts: core/quant_blocks.hpp.
enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS };

inline constexpr DType kAllDTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,  DType::Q4_0,
                                       DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,  DType::Q3_K,
                                       DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

inline constexpr int64_t kQuantBlock = 32;   // weights per block of the _0/_1/IQ4_NL types
inline constexpr int64_t kSuperBlock = 256;  // weights per block of the K-quants and IQ4_XS

const char* dtype_name(DType t);
// The name in lower case, as users write types on the command line ("f16", "q4_k").
std::string dtype_lower_name(DType t);
bool dtype_is_quantized(DType t);
// Weights that share one block: 1 for the float types.
int64_t dtype_block_elems(DType t);
// Bytes of one block (of one element for the float types).
size_t dtype_block_bytes(DType t);
// Bytes of one row of n elements; quantized rows need n % dtype_block_elems(t) == 0.
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
