#pragma once
// Causal grouped-query attention over the paged KV cache on the GPU, reading the same block
// tables as the CPU path. Twin: cpu::paged_attention (kernels/cpu/attention.hpp) over the
// cache's values rounded to `elem`.
//
// Two kernels share one argument block:
//   decode: one query row per sequence, split-K (flash-decoding): each of `splits` blocks per
//     (row, kv head) takes a contiguous share of the row's context, and a second kernel merges
//     the partial softmaxes. The grid depends only on rows and splits, never on the context
//     lengths (read on the device), so a CUDA graph captured for a batch size stays valid.
//   prefill: tiles of consecutive rows of one sequence (a prefill chunk), each K/V tile
//     loaded once into shared memory serving every row and query head of its group, with an
//     online softmax. Decode rows in a mixed step are tiles of one row.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/forward_batch.hpp"
#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

struct PagedAttentionArgs {
  Elem elem = Elem::bf16;
  const float* q = nullptr;             // [rows, num_heads * head_dim] f32, rotated
  const void* k_cache = nullptr;        // this layer's pools, [num_blocks * block_size, num_kv_heads * head_dim] of elem
  const void* v_cache = nullptr;
  const int32_t* block_tables = nullptr;  // [sequences, table_stride] block ids
  int32_t table_stride = 0;
  int32_t block_size = 16;
  const int32_t* seq_of_row = nullptr;  // [rows]: the row's block table
  const int32_t* positions = nullptr;   // [rows]: the row sees its sequence's positions <= this one;
                                        // negative (a padding row): its output is zeros
  int32_t rows = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;  // head_dim even, <= 256
  int32_t sliding_window = 0;           // > 0: a row at p sees (p - window, p]
  float scale = 1.0f;                   // a score is q·k times this: 1 / sqrt(head_dim), or the model's
  float softcap = 0.0f;                 // > 0: a score s becomes softcap * tanh(s / softcap) (Gemma 2)
  void* out = nullptr;                  // [rows, num_heads * head_dim] of elem
};

// Split-K shape for a decode step of `rows` rows: enough blocks to fill `sm_count`
// multiprocessors a few times over, at most kMaxDecodeSplits, and no split shorter than
// kMinSplitPositions positions of the longest context the stage serves (max_context).
inline constexpr int32_t kMaxDecodeSplits = 32;
inline constexpr int32_t kMinSplitPositions = 256;
int32_t decode_splits(int32_t rows, int32_t num_kv_heads, int32_t sm_count, int32_t max_context);

// Device scratch the decode kernels need for `rows` rows and `splits` splits.
size_t decode_workspace_bytes(int32_t rows, int32_t num_heads, int32_t head_dim, int32_t splits);

// Every row is its sequence's only row in the step. `workspace` holds decode_workspace_bytes.
void paged_attention_decode(const PagedAttentionArgs& args, int32_t splits, void* workspace, cudaStream_t stream);

// A run of consecutive rows of one sequence at consecutive positions.
struct AttentionTile {
  int32_t first_row = 0;
  int32_t count = 0;
};
inline constexpr int32_t kPrefillTileRows = 16;

// Cuts a step's rows into tiles of at most kPrefillTileRows: a tile never spans two
// sequences or a gap in positions. Pure host code; every row lands in exactly one tile.
std::vector<AttentionTile> plan_prefill_tiles(const ForwardBatch& batch);

// Any mix of rows. `tiles` (device memory) cover every row; n_tiles of them.
void paged_attention_prefill(const PagedAttentionArgs& args, const AttentionTile* tiles, int32_t n_tiles,
                             cudaStream_t stream);

}  // namespace orzo::cuda
