#pragma once
// Q4_K matrices regrouped 16 rows side by side, the layout of the AVX-512 gemv on words
// (kernels/cpu/isa/matmul_q8.cpp, KernelTable::reads_packed_rows). As stored, a vector
// holds one row's codes, so each 32 weights cost a convert and a scaling of their own and
// every row ends in a horizontal sum; side by side, a vector holds two codes of each of 16
// rows, one broadcast activation pair meets all of them, and a row's scalings and sums are
// shared by its 15 neighbours.
//
// A group of 16 rows is a run of tiles, one per 256-weight super-block of those rows: the
// rows' f16 d and dmin as stored, each sub-block's 6-bit scale and min a byte per row
// (kq_scale_min), and codes[p][j], whose byte 2r + e is byte 2j + e of row r's qs[32p..]:
// its low nibble weight 2j + e of sub-block 2p, its high one that of 2p + 1. 2,368 bytes
// where the rows keep 2,304: the scales unpacked.
#include <cstddef>
#include <cstdint>

#include "core/tensor.hpp"

namespace orzo::cpu {

inline constexpr int kPackedRows = 16;

struct PackedQ4_KTile {
  uint16_t d[kPackedRows], dmin[kPackedRows];
  uint8_t sc[8][kPackedRows], mn[8][kPackedRows];
  uint8_t codes[4][16][2 * kPackedRows];
};
static_assert(sizeof(PackedQ4_KTile) == 2368 && alignof(PackedQ4_KTile) == 2);

// Whether w can be packed: Q4_K, whole groups of 16 rows.
bool packs_rows(const TensorView& w);

// Bytes of w packed; packs_rows(w) must hold.
size_t packed_rows_bytes(const TensorView& w);

// Writes w's rows packed to `out` (packed_rows_bytes(w) bytes, any alignment): group by
// group, each group's tiles in the order of its super-blocks.
void pack_rows(const TensorView& w, uint8_t* out);

}  // namespace orzo::cpu
