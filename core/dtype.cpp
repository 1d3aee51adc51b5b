#include "core/dtype.hpp"

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/quant_blocks.hpp"

namespace orzo {

namespace {

struct Traits {
  const char* name;
  int64_t block_elems;
  size_t block_bytes;
};

const Traits* find(DType t) {
  static constexpr Traits kTable[] = {  // in enum order
      {"F32", 1, 4},
      {"F16", 1, 2},
      {"BF16", 1, 2},
      {"Q8_0", kQuantBlock, sizeof(BlockQ8_0)},
      {"Q4_0", kQuantBlock, sizeof(BlockQ4_0)},
      {"Q4_1", kQuantBlock, sizeof(BlockQ4_1)},
      {"Q5_0", kQuantBlock, sizeof(BlockQ5_0)},
      {"Q5_1", kQuantBlock, sizeof(BlockQ5_1)},
      {"Q2_K", kSuperBlock, sizeof(BlockQ2_K)},
      {"Q3_K", kSuperBlock, sizeof(BlockQ3_K)},
      {"Q4_K", kSuperBlock, sizeof(BlockQ4_K)},
      {"Q5_K", kSuperBlock, sizeof(BlockQ5_K)},
      {"Q6_K", kSuperBlock, sizeof(BlockQ6_K)},
      {"IQ4_NL", kQuantBlock, sizeof(BlockIQ4_NL)},
      {"IQ4_XS", kSuperBlock, sizeof(BlockIQ4_XS)},
  };
  static_assert(sizeof(kTable) / sizeof(kTable[0]) == sizeof(kAllDTypes) / sizeof(kAllDTypes[0]),
                "one row per DType, in enum order");
  const auto i = static_cast<size_t>(t);
  return i < sizeof(kTable) / sizeof(kTable[0]) ? &kTable[i] : nullptr;
}

const Traits& traits(DType t) {
  const Traits* tr = find(t);
  if (!tr) throw std::logic_error("unknown dtype " + std::to_string(static_cast<int>(t)));
  return *tr;
}

}  // namespace

const char* dtype_name(DType t) {
  const Traits* tr = find(t);
  return tr ? tr->name : "?";
}

std::string dtype_lower_name(DType t) {
  std::string name = dtype_name(t);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

bool dtype_is_quantized(DType t) { return traits(t).block_elems > 1; }

int64_t dtype_block_elems(DType t) { return traits(t).block_elems; }

size_t dtype_block_bytes(DType t) { return traits(t).block_bytes; }

size_t dtype_row_bytes(DType t, int64_t n) {
  const Traits& tr = traits(t);
  return static_cast<size_t>(n / tr.block_elems) * tr.block_bytes;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      const float v = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&bits, &v, sizeof bits);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow rounds to inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16: round mant * 2^24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  // Normal: rebias exponent and round the 13 dropped bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace orzo
