// The host-side shape decisions of GPU attention: how many splits a decode step takes and
// how a step's rows are cut into prefill tiles. Plain C++, no CUDA calls, so that it is
// tested without a GPU.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention.hpp"

namespace orzo::cuda {

int32_t decode_splits(int32_t rows, int32_t num_kv_heads, int32_t sm_count, int32_t max_context) {
  if (rows < 0 || num_kv_heads <= 0 || sm_count <= 0 || max_context < 0)
    throw std::invalid_argument("decode_splits: rows " + std::to_string(rows) + ", num_kv_heads " +
                                std::to_string(num_kv_heads) + ", sm_count " + std::to_string(sm_count) +
                                ", max_context " + std::to_string(max_context) + " (need rows, max_context >= 0 "
                                "and num_kv_heads, sm_count > 0)");
  if (rows == 0) return 1;
  // A few waves of blocks hide the latency of one block's loads behind the others'.
  constexpr int64_t kWaves = 4;
  const int64_t blocks = static_cast<int64_t>(rows) * num_kv_heads;
  const int64_t wanted = (kWaves * sm_count + blocks - 1) / blocks;
  const int64_t longest = max_context / kMinSplitPositions;  // splits the longest context can feed
  return static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>({wanted, longest, kMaxDecodeSplits})));
}

std::vector<AttentionTile> plan_prefill_tiles(const ForwardBatch& batch) {
  if (batch.positions.size() != batch.seq_index.size())
    throw std::invalid_argument("plan_prefill_tiles: " + std::to_string(batch.positions.size()) + " positions but " +
                                std::to_string(batch.seq_index.size()) + " sequence indices");
  const auto rows = static_cast<int32_t>(batch.positions.size());
  const auto pos = [&](int32_t row) { return batch.positions[static_cast<size_t>(row)]; };
  const auto seq = [&](int32_t row) { return batch.seq_index[static_cast<size_t>(row)]; };
  std::vector<AttentionTile> tiles;
  for (int32_t start = 0, end = 0; start < rows; start = end) {
    end = start + 1;
    // A padding row (negative position) stands alone: it attends to nothing.
    while (end < rows && end - start < kPrefillTileRows && pos(start) >= 0 && seq(end) == seq(start) &&
           pos(end) == pos(end - 1) + 1)
      ++end;
    tiles.push_back({start, end - start});
  }
  return tiles;
}

}  // namespace orzo::cuda
