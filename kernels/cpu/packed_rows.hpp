#pragma once
// Q4_K, Q6_K, Q4_0, Q4_1, BF16 and F16 matrices regrouped 16 rows side by side, the layout
// of the kernels that read them (AVX-512 and AVX2: kernels/cpu/isa/int8_avx512.hpp and
// int8_avx2.hpp; BF16 and F16 on AVX-512: isa/panel_product.hpp; KernelTable::reads_packed_rows). As stored, a
// vector holds one row's weights, so each 32 weights cost a convert and a scaling of their
// own and every row ends in a horizontal sum; side by side, a vector holds weights of each
// of 16 rows, one broadcast activation meets all of them, and a row's scalings and sums are
// shared by its 15 neighbours.
//
// A group of 16 rows is a run of tiles, one per block of those rows (256 weights for the
// K-quants, 32 for Q4_0, Q4_1, BF16 and F16), exactly as many bytes as the rows keep or a
// few more (Q4_K's scales unpacked).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/quant_blocks.hpp"
#include "core/tensor.hpp"

namespace orzo::cpu {

inline constexpr int kPackedRows = 16;

// Q4_K: the rows' f16 d and dmin as stored, each sub-block's 6-bit scale and min a byte
// per row (kq_scale_min), and codes[p][j], whose byte 2r + e is byte 2j + e of row r's
// qs[32p..]: its low nibble weight 2j + e of sub-block 2p, its high one that of 2p + 1.
// 2,368 bytes where the rows keep 2,304: the scales unpacked.
struct PackedQ4_KTile {
  uint16_t d[kPackedRows], dmin[kPackedRows];
  uint8_t sc[8][kPackedRows], mn[8][kPackedRows];
  uint8_t codes[4][16][2 * kPackedRows];
};
static_assert(sizeof(PackedQ4_KTile) == 2368 && alignof(PackedQ4_KTile) == 2);

// Q6_K: the rows' f16 d, each 16 weights' int8 scale, and the 6-bit codes (q + 32, as
// stored) split in two planes laid out as the int8 strips lay codes (a 32-bit lane per row,
// four consecutive weights of it), so that a 64-byte load and a few bit operations give a
// vector the dot product takes as it is. Weights 32b .. 32b + 31 of a row are block b.
// low[p][q][4r + e]: the low 4 bits of weight 4q + e of row r's block 2p (low nibble) and of
// its block 2p + 1 (high nibble). high[p][h][4r + e]: the top 2 bits of weight 8h + e of
// blocks 2p and 2p + 1 (bits 0-1, 2-3), and of weight 8h + 4 + e of the same (bits 4-5,
// 6-7). 3,360 bytes, the rows' own.
struct PackedQ6_KTile {
  uint16_t d[kPackedRows];
  int8_t sc[16][kPackedRows];  // sc[s][r]: row r's scale of weights 16s .. 16s + 15
  uint8_t low[4][8][4 * kPackedRows];
  uint8_t high[4][4][4 * kPackedRows];
};
static_assert(sizeof(PackedQ6_KTile) == 3360 && alignof(PackedQ6_KTile) == 2);

// Q4_0 and Q4_1: the rows' f16 d (and m) as stored, and codes[g][4r + e] = byte 4g + e of
// row r's qs, whose low nibble is weight 4g + e and high one weight 16 + 4g + e: a 32-bit
// lane per row, as the strips lay codes. The rows' own bytes.
struct PackedQ4_0Tile {
  uint16_t d[kPackedRows];
  uint8_t codes[4][4 * kPackedRows];
};
struct PackedQ4_1Tile {
  uint16_t d[kPackedRows], m[kPackedRows];
  uint8_t codes[4][4 * kPackedRows];
};
static_assert(sizeof(PackedQ4_0Tile) == 288 && sizeof(PackedQ4_1Tile) == 320);

// BF16 and F16, 32 weights a row, the rows' own bytes (isa/panel_product.hpp). BF16:
// pairs[p][2r + e] = weight 2p + e of row r, a 32-bit lane per row holding two neighbouring
// weights, the pair vdpbf16ps multiplies with a pair of activations broadcast to every
// lane. F16: w[c][r] = weight c of row r, 16 rows' weight c converted to one vector of f32.
inline constexpr int64_t kHalfTileWeights = 32;
struct PackedBF16Tile {
  uint16_t pairs[kHalfTileWeights / 2][2 * kPackedRows];
};
struct PackedF16Tile {
  uint16_t w[kHalfTileWeights][kPackedRows];
};
static_assert(sizeof(PackedBF16Tile) == 1024 && sizeof(PackedF16Tile) == 1024);

// Whether w can be packed: one of the types above, whole groups of 16 rows of whole tiles.
bool packs_rows(const TensorView& w);

// Bytes of w packed; packs_rows(w) must hold.
size_t packed_rows_bytes(const TensorView& w);

// Writes w's rows packed to `out` (packed_rows_bytes(w) bytes, any alignment): group by
// group, each group's tiles in the order of its super-blocks.
void pack_rows(const TensorView& w, uint8_t* out);

// Row r's d, dmin and 12 scale bytes of tile t, the scales packed back as kq_scale_min
// reads them, into the stored block at `block` (its qs left alone). Byte by byte in place:
// a block built on the stack and copied whole would be read back with one wide load right
// after its narrow stores, which stalls on their forwarding.
inline void unpack_scales(const PackedQ4_KTile& t, int r, uint8_t* block) {
  std::memcpy(block + offsetof(BlockQ4_K, d), &t.d[r], sizeof t.d[r]);
  std::memcpy(block + offsetof(BlockQ4_K, dmin), &t.dmin[r], sizeof t.dmin[r]);
  uint8_t* scales = block + offsetof(BlockQ4_K, scales);
  // Sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min), sub-blocks 4-7 in
  // the nibbles of bytes 8-11 and the top bits of 0-7.
  for (int s = 0; s < 4; ++s) {
    scales[s] = static_cast<uint8_t>(t.sc[s][r] | (t.sc[s + 4][r] >> 4) << 6);
    scales[s + 4] = static_cast<uint8_t>(t.mn[s][r] | (t.mn[s + 4][r] >> 4) << 6);
    scales[s + 8] = static_cast<uint8_t>((t.sc[s + 4][r] & 0x0f) | (t.mn[s + 4][r] & 0x0f) << 4);
  }
}

// The inverse: rows [first, first + count) of k weights of type t as stored, byte for
// byte, from the matrix's tiles (TensorView::packed), into `scratch` (grown as needed):
// first and count are whole groups. For kernels that meet many activation rows with the
// rows as stored.
const uint8_t* unpacked_rows(DType t, const void* tiles, int64_t k, int64_t first, int64_t count,
                             std::vector<uint8_t>& scratch);

// Row `row` alone as stored (dtype_row_bytes(t, k) bytes at `out`): for a tied embedding,
// whose gather reads the output matrix's tiles where the stored rows went back to the kernel.
void unpack_row(DType t, const void* tiles, int64_t k, int64_t row, uint8_t* out);

}  // namespace orzo::cpu
