#pragma once
// The byte layouts of GGML's quantized blocks, as the GGUF specification and ggml's
// public headers describe them. Weight bytes come from mapped files, so code reads the
// fields at offsetof(Block, field) with memcpy rather than through a Block pointer; the
// structs are the one place that says where each field sits. f16 fields are raw bits.
//
// Within a 32-weight block of 4-bit codes, byte j holds weight j in its low nibble and
// weight j + 16 in its high one. The K-quants split a 256-weight super-block into
// sub-blocks of 16 or 32 weights whose scales are quantized against the super-block's d.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"

namespace orzo {

// A 16-bit field of a block (an f16 scale, IQ4_XS's high scale bits), or of an F16/BF16
// row; nothing wider than a byte is assumed to be aligned, and memcpy compiles to a plain
// load or store.
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

// x = d * q, q in [-127, 127].
struct BlockQ8_0 { uint16_t d; int8_t qs[kQuantBlock]; };
// x = d * (q - 8).
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQuantBlock / 2]; };
// x = d * q + m, q in [0, 15].
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[kQuantBlock / 2]; };
// x = d * (q - 16); bit j of the little-endian qh is bit 4 of weight j.
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQuantBlock / 2]; };
// x = d * q + m, q in [0, 31].
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[kQuantBlock / 2]; };
// x = d * kIq4Levels[q].
struct BlockIQ4_NL { uint16_t d; uint8_t qs[kQuantBlock / 2]; };

// 16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits.
// Weight e's code is bits 2i..2i+1 of qs[32 h + l], where e = 128 h + 32 i + l.
struct BlockQ2_K { uint8_t scales[kSuperBlock / 16]; uint8_t qs[kSuperBlock / 4]; uint16_t d, dmin; };
// 16 sub-blocks of 16: x = d * (scale6[s] - 32) * (q - 4 * !hbit), q 2 bits placed as in
// Q2_K, hbit = bit e / 32 of hmask[e % 32]. The 6-bit scales: low 4 bits from nibble s / 8
// of scales[s % 8], high 2 bits from bits 2 (s / 4) of scales[8 + s % 4].
struct BlockQ3_K { uint8_t hmask[kSuperBlock / 8]; uint8_t qs[kSuperBlock / 4]; uint8_t scales[12]; uint16_t d; };
// 8 sub-blocks of 32: x = d * sc[s] * q - dmin * mn[s], q 4 bits; weight e = 64 c + 32 h + l
// is nibble h of qs[32 c + l]. sc/mn are 6 bits, packed as kq_scale_min() unpacks them.
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[kSuperBlock / 2]; };
// As Q4_K with a fifth bit: bit e / 32 of qh[e % 32].
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[kSuperBlock / 8]; uint8_t qs[kSuperBlock / 2]; };
// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q 6 bits; for e = 128 c + r (r < 128):
// low 4 bits = nibble (r / 64) of ql[64 c + r % 64], high 2 bits = bits 2 (r / 32) of qh[32 c + r % 32].
struct BlockQ6_K { uint8_t ql[kSuperBlock / 2]; uint8_t qh[kSuperBlock / 4]; int8_t scales[kSuperBlock / 16]; uint16_t d; };
// 8 sub-blocks of 32: x = d * (scale6[s] - 32) * kIq4Levels[q]; scale6's low 4 bits are
// nibble s % 2 of scales_l[s / 2], its high 2 bits bits 2s..2s+1 of scales_h; weight
// e = 32 s + 16 h + l is nibble h of qs[16 s + l].
struct BlockIQ4_XS { uint16_t d, scales_h; uint8_t scales_l[kSuperBlock / 64]; uint8_t qs[kSuperBlock / 2]; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 &&
                  sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockIQ4_NL) == 18,
              "GGML 32-weight block layouts");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_XS) == 136,
              "GGML 256-weight block layouts");

// The 16 non-uniform levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q4_K/Q5_K's eight 6-bit scales and mins from their 12 packed bytes: sub-blocks 0-3 keep
// theirs in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 put their
// low 4 bits in the nibbles of bytes 8-11 and their top 2 bits in the top bits of 0-7.
inline void kq_scale_min(const uint8_t* scales, int s, uint8_t& sc, uint8_t& mn) {
  if (s < 4) {
    sc = scales[s] & 63;
    mn = scales[s + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((scales[s + 4] & 0x0f) | ((scales[s - 4] >> 6) << 4));
    mn = static_cast<uint8_t>((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
  }
}

}  // namespace orzo
