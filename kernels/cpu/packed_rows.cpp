#include "kernels/cpu/packed_rows.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace orzo::cpu {

namespace {

// The weights of a row that one tile holds: a block, or the half types' 32.
int64_t tile_weights(DType t) {
  return t == DType::BF16 || t == DType::F16 ? kHalfTileWeights : dtype_block_elems(t);
}

// A BF16 or F16 row's 32 weights of one tile, as stored.
struct HalfRun {
  uint16_t w[kHalfTileWeights];
};

// A row's stored bytes that one tile holds (its block, or a HalfRun) and the tile.
template <class Unit, class Tile>
struct TileKind {
  using StoredUnit = Unit;
  using Packed = Tile;
};

// Calls f(TileKind<...>{}) for a type whose rows pack and returns true; false, calling
// nothing, for the others. The one list of the types that pack.
template <class F>
bool with_tile_kind(DType t, F&& f) {
  switch (t) {
    case DType::Q4_K: f(TileKind<BlockQ4_K, PackedQ4_KTile>{}); return true;
    case DType::Q6_K: f(TileKind<BlockQ6_K, PackedQ6_KTile>{}); return true;
    case DType::Q4_0: f(TileKind<BlockQ4_0, PackedQ4_0Tile>{}); return true;
    case DType::Q4_1: f(TileKind<BlockQ4_1, PackedQ4_1Tile>{}); return true;
    case DType::BF16: f(TileKind<HalfRun, PackedBF16Tile>{}); return true;
    case DType::F16: f(TileKind<HalfRun, PackedF16Tile>{}); return true;
    default: return false;
  }
}

// Bytes of a tile of 16 rows of type t (a Q4_K one unpacks the scales).
size_t tile_bytes(DType t) {
  size_t bytes = 0;
  with_tile_kind(t, [&](auto kind) { bytes = sizeof(typename decltype(kind)::Packed); });
  return bytes;
}

void pack_tile(const BlockQ4_K (&rows)[kPackedRows], PackedQ4_KTile& tile) {
  for (int r = 0; r < kPackedRows; ++r) {
    const BlockQ4_K& b = rows[r];
    tile.d[r] = b.d;
    tile.dmin[r] = b.dmin;
    for (int s = 0; s < 8; ++s) kq_scale_min(b.scales, s, tile.sc[s][r], tile.mn[s][r]);
    for (int p = 0; p < 4; ++p)
      for (int j = 0; j < 16; ++j) std::memcpy(&tile.codes[p][j][2 * r], b.qs + 32 * p + 2 * j, 2);
  }
}

// A Q6_K block's 256 codes (q + 32, six bits), and back. The block's halves of 128 are
// alike; in one, weight 32c + l takes the low nibble (c = 0, 1) or the high one (c = 2, 3)
// of ql[32 (c % 2) + l], and bit pair c of qh[l].
void q6_k_codes(const BlockQ6_K& b, uint8_t (&q)[256]) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    uint8_t* out = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 0x0f) | (qh[l] & 3) << 4);
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0f) | (qh[l] >> 2 & 3) << 4);
      out[l + 64] = static_cast<uint8_t>(ql[l] >> 4 | (qh[l] >> 4 & 3) << 4);
      out[l + 96] = static_cast<uint8_t>(ql[l + 32] >> 4 | (qh[l] >> 6) << 4);
    }
  }
}
void q6_k_store(const uint8_t (&q)[256], BlockQ6_K& b) {
  for (int half = 0; half < 2; ++half) {
    uint8_t* ql = b.ql + 64 * half;
    uint8_t* qh = b.qh + 32 * half;
    const uint8_t* in = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((in[l] & 0x0f) | (in[l + 64] & 0x0f) << 4);
      ql[l + 32] = static_cast<uint8_t>((in[l + 32] & 0x0f) | (in[l + 96] & 0x0f) << 4);
      qh[l] = static_cast<uint8_t>(in[l] >> 4 | (in[l + 32] >> 4) << 2 | (in[l + 64] >> 4) << 4 | (in[l + 96] >> 4) << 6);
    }
  }
}

void pack_tile(const BlockQ6_K (&rows)[kPackedRows], PackedQ6_KTile& tile) {
  for (int r = 0; r < kPackedRows; ++r) {
    const BlockQ6_K& b = rows[r];
    tile.d[r] = b.d;
    for (int s = 0; s < 16; ++s) tile.sc[s][r] = b.scales[s];
    uint8_t q[256];
    q6_k_codes(b, q);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* a = q + 64 * p;  // block 2p; block 2p + 1 at a + 32
      for (int e = 0; e < 4; ++e) {
        for (int j = 0; j < 8; ++j)
          tile.low[p][j][4 * r + e] = static_cast<uint8_t>((a[4 * j + e] & 0x0f) | (a[32 + 4 * j + e] & 0x0f) << 4);
        for (int h = 0; h < 4; ++h)
          tile.high[p][h][4 * r + e] = static_cast<uint8_t>(a[8 * h + e] >> 4 | (a[32 + 8 * h + e] >> 4) << 2 |
                                                            (a[8 * h + 4 + e] >> 4) << 4 | (a[32 + 8 * h + 4 + e] >> 4) << 6);
      }
    }
  }
}

template <class Block, class Tile>
void pack_nibble_tile(const Block (&rows)[kPackedRows], Tile& tile) {
  for (int r = 0; r < kPackedRows; ++r) {
    tile.d[r] = rows[r].d;
    if constexpr (std::is_same_v<Block, BlockQ4_1>) tile.m[r] = rows[r].m;
    for (int g = 0; g < 4; ++g) std::memcpy(&tile.codes[g][4 * r], rows[r].qs + 4 * g, 4);
  }
}
void pack_tile(const BlockQ4_0 (&rows)[kPackedRows], PackedQ4_0Tile& tile) { pack_nibble_tile(rows, tile); }
void pack_tile(const BlockQ4_1 (&rows)[kPackedRows], PackedQ4_1Tile& tile) { pack_nibble_tile(rows, tile); }

void pack_tile(const HalfRun (&rows)[kPackedRows], PackedBF16Tile& tile) {
  for (int r = 0; r < kPackedRows; ++r)
    for (int p = 0; p < kHalfTileWeights / 2; ++p) std::memcpy(&tile.pairs[p][2 * r], rows[r].w + 2 * p, 4);
}
void pack_tile(const HalfRun (&rows)[kPackedRows], PackedF16Tile& tile) {
  for (int r = 0; r < kPackedRows; ++r)
    for (int c = 0; c < kHalfTileWeights; ++c) tile.w[c][r] = rows[r].w[c];
}

template <class Block, class Tile>
void pack_tiles(const TensorView& w, uint8_t* out) {
  const int64_t units = w.cols() / tile_weights(w.dtype);
  Block rows[kPackedRows];
  Tile tile;
  for (int64_t g = 0; g < w.rows() / kPackedRows; ++g)
    for (int64_t u = 0; u < units; ++u) {
      for (int r = 0; r < kPackedRows; ++r)
        std::memcpy(&rows[r], w.row(g * kPackedRows + r) + u * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
      pack_tile(rows, tile);
      std::memcpy(out + static_cast<size_t>(g * units + u) * sizeof tile, &tile, sizeof tile);
    }
}

// Row r of a tile as its stored block, byte for byte.
void unpack_block(const PackedQ4_KTile& t, int r, uint8_t* block) {
  unpack_scales(t, r, block);
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 16; ++j) std::memcpy(block + offsetof(BlockQ4_K, qs) + 32 * p + 2 * j, &t.codes[p][j][2 * r], 2);
}

void unpack_block(const PackedQ6_KTile& t, int r, uint8_t* block) {
  BlockQ6_K b;
  b.d = t.d[r];
  for (int s = 0; s < 16; ++s) b.scales[s] = t.sc[s][r];
  uint8_t q[256];
  for (int p = 0; p < 4; ++p) {
    uint8_t* a = q + 64 * p;
    for (int e = 0; e < 4; ++e) {
      for (int j = 0; j < 8; ++j) {
        const uint8_t low = t.low[p][j][4 * r + e];
        a[4 * j + e] = low & 0x0f;
        a[32 + 4 * j + e] = low >> 4;
      }
      for (int h = 0; h < 4; ++h) {
        const int high = t.high[p][h][4 * r + e];
        a[8 * h + e] = static_cast<uint8_t>(a[8 * h + e] | (high & 3) << 4);
        a[32 + 8 * h + e] = static_cast<uint8_t>(a[32 + 8 * h + e] | (high >> 2 & 3) << 4);
        a[8 * h + 4 + e] = static_cast<uint8_t>(a[8 * h + 4 + e] | (high >> 4 & 3) << 4);
        a[32 + 8 * h + 4 + e] = static_cast<uint8_t>(a[32 + 8 * h + 4 + e] | (high >> 6) << 4);
      }
    }
  }
  q6_k_store(q, b);
  std::memcpy(block, &b, sizeof b);
}

template <class Block, class Tile>
void unpack_nibble_block(const Tile& t, int r, uint8_t* block) {
  Block b;
  b.d = t.d[r];
  if constexpr (std::is_same_v<Block, BlockQ4_1>) b.m = t.m[r];
  for (int g = 0; g < 4; ++g) std::memcpy(b.qs + 4 * g, &t.codes[g][4 * r], 4);
  std::memcpy(block, &b, sizeof b);
}
void unpack_block(const PackedQ4_0Tile& t, int r, uint8_t* block) { unpack_nibble_block<BlockQ4_0>(t, r, block); }
void unpack_block(const PackedQ4_1Tile& t, int r, uint8_t* block) { unpack_nibble_block<BlockQ4_1>(t, r, block); }
void unpack_block(const PackedBF16Tile& t, int r, uint8_t* block) {
  for (int p = 0; p < kHalfTileWeights / 2; ++p) std::memcpy(block + 4 * p, &t.pairs[p][2 * r], 4);
}
void unpack_block(const PackedF16Tile& t, int r, uint8_t* block) {
  for (int c = 0; c < kHalfTileWeights; ++c) std::memcpy(block + 2 * c, &t.w[c][r], 2);
}

// Rows [r0, r1) of the group whose tiles start at `tiles`, row_bytes apart at `out`.
template <class Tile>
void unpack_group(const Tile* tiles, int64_t units, size_t block_bytes, int r0, int r1, uint8_t* out, size_t row_bytes) {
  for (int64_t u = 0; u < units; ++u)
    for (int r = r0; r < r1; ++r)
      unpack_block(tiles[u], r, out + static_cast<size_t>(r - r0) * row_bytes + static_cast<size_t>(u) * block_bytes);
}

// Rows [r0, r1) of group g of a matrix of type t, k weights a row.
void unpack_group(DType t, const void* tiles, int64_t k, int64_t g, int r0, int r1, uint8_t* out) {
  const int64_t units = k / tile_weights(t);
  const size_t row_bytes = dtype_row_bytes(t, k);
  const bool packs = with_tile_kind(t, [&](auto kind) {
    using K = decltype(kind);
    unpack_group(static_cast<const typename K::Packed*>(tiles) + g * units, units, sizeof(typename K::StoredUnit), r0, r1,
                 out, row_bytes);
  });
  if (!packs) throw std::logic_error("unpacked_rows: not a type whose rows pack");
}

}  // namespace

bool packs_rows(const TensorView& w) {
  const DType t = w.dtype;
  return with_tile_kind(t, [](auto) {}) && w.rows() % kPackedRows == 0 && w.cols() % tile_weights(t) == 0;
}

size_t packed_rows_bytes(const TensorView& w) {
  return static_cast<size_t>(w.rows() / kPackedRows) * static_cast<size_t>(w.cols() / tile_weights(w.dtype)) *
         tile_bytes(w.dtype);
}

void pack_rows(const TensorView& w, uint8_t* out) {
  const bool packs = with_tile_kind(w.dtype, [&](auto kind) {
    using K = decltype(kind);
    pack_tiles<typename K::StoredUnit, typename K::Packed>(w, out);
  });
  if (!packs) throw std::logic_error("pack_rows: " + w.name + " is not of a type whose rows pack");
}

const uint8_t* unpacked_rows(DType t, const void* tiles, int64_t k, int64_t first, int64_t count,
                             std::vector<uint8_t>& scratch) {
  const size_t row_bytes = dtype_row_bytes(t, k);
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(count) * row_bytes));
  for (int64_t g = 0; g < count; g += kPackedRows)
    unpack_group(t, tiles, k, (first + g) / kPackedRows, 0, kPackedRows, scratch.data() + static_cast<size_t>(g) * row_bytes);
  return scratch.data();
}

void unpack_row(DType t, const void* tiles, int64_t k, int64_t row, uint8_t* out) {
  const int r = static_cast<int>(row % kPackedRows);
  unpack_group(t, tiles, k, row / kPackedRows, r, r + 1, out);
}

}  // namespace orzo::cpu
