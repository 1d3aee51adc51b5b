#include "kernels/cpu/packed_rows.hpp"

#include <algorithm>
#include <cstring>

namespace orzo::cpu {

bool packs_rows(const TensorView& w) {
  return w.dtype == DType::Q4_K && w.rows() % kPackedRows == 0 && w.cols() % kSuperBlock == 0;
}

size_t packed_rows_bytes(const TensorView& w) {
  return static_cast<size_t>(w.rows() / kPackedRows) * static_cast<size_t>(w.cols() / kSuperBlock) *
         sizeof(PackedQ4_KTile);
}

void pack_rows(const TensorView& w, uint8_t* out) {
  const int64_t units = w.cols() / kSuperBlock;
  PackedQ4_KTile tile;
  for (int64_t g = 0; g < w.rows() / kPackedRows; ++g)
    for (int64_t u = 0; u < units; ++u) {
      for (int r = 0; r < kPackedRows; ++r) {
        BlockQ4_K b;
        std::memcpy(&b, w.row(g * kPackedRows + r) + u * static_cast<int64_t>(sizeof b), sizeof b);
        tile.d[r] = b.d;
        tile.dmin[r] = b.dmin;
        for (int s = 0; s < 8; ++s) kq_scale_min(b.scales, s, tile.sc[s][r], tile.mn[s][r]);
        for (int p = 0; p < 4; ++p)
          for (int j = 0; j < 16; ++j) std::memcpy(&tile.codes[p][j][2 * r], b.qs + 32 * p + 2 * j, 2);
      }
      std::memcpy(out + static_cast<size_t>(g * units + u) * sizeof tile, &tile, sizeof tile);
    }
}

void unpack_rows(const PackedQ4_KTile* tiles, int64_t units, uint8_t* out, size_t row_bytes) {
  for (int64_t u = 0; u < units; ++u) {
    const PackedQ4_KTile& t = tiles[u];
    for (int r = 0; r < kPackedRows; ++r) {
      uint8_t* block = out + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(u) * sizeof(BlockQ4_K);
      unpack_scales(t, r, block);
      for (int p = 0; p < 4; ++p)
        for (int j = 0; j < 16; ++j) std::memcpy(block + offsetof(BlockQ4_K, qs) + 32 * p + 2 * j, &t.codes[p][j][2 * r], 2);
    }
  }
}

const uint8_t* unpacked_rows(const PackedQ4_KTile* tiles, int64_t k, int64_t first, int64_t count,
                             std::vector<uint8_t>& scratch) {
  const size_t row_bytes = dtype_row_bytes(DType::Q4_K, k);
  const int64_t units = k / kSuperBlock;
  scratch.resize(std::max(scratch.size(), static_cast<size_t>(count) * row_bytes));
  for (int64_t g = 0; g < count; g += kPackedRows)
    unpack_rows(tiles + (first + g) / kPackedRows * units, units, scratch.data() + static_cast<size_t>(g) * row_bytes, row_bytes);
  return scratch.data();
}

}  // namespace orzo::cpu
