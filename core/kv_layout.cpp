#include "core/kv_layout.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace orzo {

KvLayout KvLayout::flat(int64_t layers) {
  KvLayout layout;
  layout.windows = {0};
  layout.group_of.assign(static_cast<size_t>(layers), 0);
  for (int64_t l = 0; l < layers; ++l) layout.plane_of.push_back(static_cast<int32_t>(l));
  return layout;
}

KvLayout KvLayout::of(const std::vector<int64_t>& layer_windows, int64_t max_model_len) {
  // The layers of each window, in order; 0 (global) sorts first and becomes group 0.
  std::map<int64_t, std::vector<int32_t>> kinds;
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    const int64_t w = layer_windows[l];
    if (w < 0) throw std::invalid_argument("KvLayout: layer " + std::to_string(l) + " has window " + std::to_string(w));
    kinds[w >= max_model_len ? 0 : w].push_back(static_cast<int32_t>(l));
  }
  const auto layers = static_cast<int64_t>(layer_windows.size());
  if (kinds.size() < 2 || kinds.begin()->first != 0) return flat(layers);

  size_t size = layer_windows.size();
  for (const auto& [window, members] : kinds) size = std::min(size, members.size());
  KvLayout layout;
  layout.group_of.resize(layer_windows.size());
  layout.plane_of.resize(layer_windows.size());
  for (const auto& [window, members] : kinds) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (i % size == 0) layout.windows.push_back(static_cast<int32_t>(window));
      layout.group_of[static_cast<size_t>(members[i])] = layout.groups() - 1;
      layout.plane_of[static_cast<size_t>(members[i])] = static_cast<int32_t>(i % size);
    }
  }
  return layout;
}

std::vector<int32_t> KvLayout::planes_in(int64_t begin, int64_t end) const {
  // A group's layers are dealt in model order, so those inside a range are consecutive
  // planes: the range's first one of each group becomes plane 0.
  std::vector<int32_t> first(windows.size(), -1), planes;
  for (int64_t l = begin; l < end; ++l) {
    const auto g = static_cast<size_t>(group_of[static_cast<size_t>(l)]);
    const int32_t plane = plane_of[static_cast<size_t>(l)];
    if (first[g] < 0) first[g] = plane;
    planes.push_back(plane - first[g]);
  }
  return planes;
}

int32_t KvLayout::planes_for(int64_t begin, int64_t end) const {
  const auto planes = planes_in(begin, end);
  return planes.empty() ? 0 : *std::max_element(planes.begin(), planes.end()) + 1;
}

int64_t blocks_for_tokens(const std::vector<int32_t>& windows, int64_t tokens, int32_t block_size, int32_t chunk) {
  const int64_t whole = (tokens + block_size - 1) / block_size;
  int64_t blocks = 0;
  for (const int32_t window : windows) {
    // A chunk's rows read from window - 1 positions before it; that span starts anywhere in a block.
    const int64_t span = window == 0 ? whole : (int64_t{chunk} + window - 1 + block_size - 1) / block_size + 1;
    blocks += std::min(whole, span);
  }
  return blocks;
}

}  // namespace orzo
