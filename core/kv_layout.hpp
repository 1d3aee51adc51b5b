#pragma once
// Which layers share a block table. A sliding-window layer reads only its window's KV, so
// where a model interleaves sliding and global layers (Gemma 2/3) and contexts outgrow the
// window, the sliding layers get tables of their own that give blocks back once they fall
// out of every future row's window; the global layers keep theirs whole.
//
// Every table draws on one pool of block ids, and an id must mean the same bytes whichever
// table holds it: so the layers are dealt into groups of equal size (as vLLM's hybrid
// allocator does), and a block stores one plane per layer of a group. Group 0 holds global
// layers and is the prefix cache's spine (its table keeps every block of a sequence); the
// groups after it hold sliding layers. A group short of the common size leaves planes unused.
#include <cstdint>
#include <vector>

namespace orzo {

// A table entry a sliding group gave back: no row that may still run reads it.
inline constexpr int32_t kNoBlock = -1;

struct KvLayout {
  std::vector<int32_t> group_of;  // per layer of the model
  std::vector<int32_t> plane_of;  // per layer: its place among the layers of its group
  std::vector<int32_t> windows;   // per group: 0 for global layers, else the window in tokens

  int32_t groups() const { return static_cast<int32_t>(windows.size()); }

  // One group of every layer: one table serves them all, a block holds every layer.
  static KvLayout flat(int64_t layers);
  // layer_windows[l]: 0 for a global layer, else the window it attends through. A window
  // of max_model_len or more is global in effect. Flat unless global and sliding layers
  // are both left: with none global nothing anchors the prefix cache, and with none sliding
  // there is nothing to save.
  static KvLayout of(const std::vector<int64_t>& layer_windows, int64_t max_model_len);

  // For the layers [begin, end): each one's plane within the blocks a stage holding just
  // those layers keeps (its place among its group's layers in the range), and how many
  // planes such a block needs (the most any group has there).
  std::vector<int32_t> planes_in(int64_t begin, int64_t end) const;
  int32_t planes_for(int64_t begin, int64_t end) const;
};

// The first block of a table a row at `position` reads in a group of `window` (0: global).
inline int32_t first_block_read(int32_t window, int32_t position, int32_t block_size) {
  return window == 0 || position < window ? 0 : (position - window + 1) / block_size;
}

// The most blocks one sequence of `tokens` positions holds across the groups of `windows`
// while its steps compute chunks of up to `chunk` rows: its whole global table, and in each
// sliding group the blocks from the first row's window to the chunk's end.
int64_t blocks_for_tokens(const std::vector<int32_t>& windows, int64_t tokens, int32_t block_size, int32_t chunk);

}  // namespace orzo
