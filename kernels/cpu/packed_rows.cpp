#include "kernels/cpu/packed_rows.hpp"

#include <cstring>

#include "core/quant_blocks.hpp"

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

}  // namespace orzo::cpu
