#include "kernels/cpu/dequantize.hpp"

#include <cstddef>
#include <stdexcept>

#include "core/quant_blocks.hpp"

// Bit-exactness with the reference needs every product and sum rounded on its own, in the
// reference's order ((d * sc) * q - dmin * m): this file is compiled with -ffp-contract=off
// (kernels/CMakeLists.txt) so that no FMA fuses them.

namespace orzo::cpu {
namespace {

float f16_at(const uint8_t* block, size_t offset) { return f16_to_f32(load_u16(block + offset)); }

// Code j (0..31) of a 32-weight block of nibbles: byte j holds j in its low half, j + 16 in its high.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

void q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ8_0, d));
  const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

void q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ4_0, d));
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(nibble(b + offsetof(BlockQ4_0, qs), j) - 8) * d;
}

void q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ4_1, d)), m = f16_at(b, offsetof(BlockQ4_1, m));
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(nibble(b + offsetof(BlockQ4_1, qs), j)) + m;
}

// The fifth bit of code j of a Q5 block, from its little-endian 32-bit qh.
int fifth_bit(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

void q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ5_0, d));
  for (int j = 0; j < 32; ++j) {
    const int q = nibble(b + offsetof(BlockQ5_0, qs), j) | fifth_bit(b + offsetof(BlockQ5_0, qh), j) << 4;
    y[j] = d * static_cast<float>(q - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ5_1, d)), m = f16_at(b, offsetof(BlockQ5_1, m));
  for (int j = 0; j < 32; ++j) {
    const int q = nibble(b + offsetof(BlockQ5_1, qs), j) | fifth_bit(b + offsetof(BlockQ5_1, qh), j) << 4;
    y[j] = d * static_cast<float>(q) + m;
  }
}

void iq4_nl(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockIQ4_NL, d));
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(kIq4Levels[nibble(b + offsetof(BlockIQ4_NL, qs), j)]);
}

// The 2-bit code of weight e (0..255) as Q2_K and Q3_K place them: e = 128 h + 32 i + l
// sits in bits 2i of qs[32 h + l].
int two_bits(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3; }

void q2_k(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ2_K, d)), dmin = f16_at(b, offsetof(BlockQ2_K, dmin));
  const uint8_t* scales = b + offsetof(BlockQ2_K, scales);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(scales[s] & 0x0f), ml = dmin * static_cast<float>(scales[s] >> 4);
    for (int e = 16 * s; e < 16 * s + 16; ++e)
      y[e] = dl * static_cast<float>(two_bits(b + offsetof(BlockQ2_K, qs), e)) - ml;
  }
}

void q3_k(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ3_K, d));
  const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
  const uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
  for (int s = 0; s < 16; ++s) {
    const int low = (scales[s % 8] >> (4 * (s / 8))) & 0x0f, high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float dl = d * static_cast<float>((low | high << 4) - 32);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      // A set high bit means no offset: the code is q - 4 when the bit is clear.
      const int hbit = (hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * static_cast<float>(two_bits(b + offsetof(BlockQ3_K, qs), e) - (hbit ? 0 : 4));
    }
  }
}

// Weight e of a Q4_K/Q5_K super-block: e = 64 c + 32 h + l is nibble h of qs[32 c + l].
int k_nibble(const uint8_t* qs, int e) { return (qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 0x0f; }

template <bool kFifthBit>
void q45_k(const uint8_t* b, size_t d_at, size_t dmin_at, size_t scales_at, size_t qs_at, size_t qh_at, float* y) {
  const float d = f16_at(b, d_at), dmin = f16_at(b, dmin_at);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    kq_scale_min(b + scales_at, s, sc, mn);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
    for (int e = 32 * s; e < 32 * s + 32; ++e) {
      int q = k_nibble(b + qs_at, e);
      if constexpr (kFifthBit) q |= ((b[qh_at + e % 32] >> (e / 32)) & 1) << 4;
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void q4_k(const uint8_t* b, float* y) {
  q45_k<false>(b, offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin), offsetof(BlockQ4_K, scales),
               offsetof(BlockQ4_K, qs), 0, y);
}

void q5_k(const uint8_t* b, float* y) {
  q45_k<true>(b, offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin), offsetof(BlockQ5_K, scales),
              offsetof(BlockQ5_K, qs), offsetof(BlockQ5_K, qh), y);
}

void q6_k(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockQ6_K, d));
  const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
  const uint8_t* ql = b + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = b + offsetof(BlockQ6_K, qh);
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(scales[s]);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const int c = e / 128, r = e % 128;
      const int low = (ql[64 * c + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (qh[32 * c + r % 32] >> (2 * (r / 32))) & 3;
      y[e] = dl * static_cast<float>((low | high << 4) - 32);
    }
  }
}

void iq4_xs(const uint8_t* b, float* y) {
  const float d = f16_at(b, offsetof(BlockIQ4_XS, d));
  const unsigned scales_h = load_u16(b + offsetof(BlockIQ4_XS, scales_h));
  const uint8_t* scales_l = b + offsetof(BlockIQ4_XS, scales_l);
  for (int s = 0; s < 8; ++s) {
    const int scale = (((scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((scales_h >> (2 * s)) & 3) << 4) - 32;
    const float dl = d * static_cast<float>(scale);
    const uint8_t* qs = b + offsetof(BlockIQ4_XS, qs) + 16 * s;
    for (int j = 0; j < 32; ++j) y[32 * s + j] = dl * static_cast<float>(kIq4Levels[nibble(qs, j)]);
  }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder decoder_for(DType t) {
  switch (t) {
    case DType::Q8_0: return q8_0;
    case DType::Q4_0: return q4_0;
    case DType::Q4_1: return q4_1;
    case DType::Q5_0: return q5_0;
    case DType::Q5_1: return q5_1;
    case DType::Q2_K: return q2_k;
    case DType::Q3_K: return q3_k;
    case DType::Q4_K: return q4_k;
    case DType::Q5_K: return q5_k;
    case DType::Q6_K: return q6_k;
    case DType::IQ4_NL: return iq4_nl;
    case DType::IQ4_XS: return iq4_xs;
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
  throw std::logic_error(std::string("dequantize_blocks: ") + dtype_name(t) + " is not a block type");
}

}  // namespace

void dequantize_blocks(DType t, const uint8_t* src, int64_t n, float* dst) {
  const BlockDecoder decode = decoder_for(t);
  const int64_t elems = dtype_block_elems(t);
  const size_t bytes = dtype_block_bytes(t);
  for (int64_t b = 0; b < n / elems; ++b) decode(src + static_cast<size_t>(b) * bytes, dst + b * elems);
}

}  // namespace orzo::cpu
