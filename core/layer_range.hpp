#pragma once
// A contiguous range of a model's layers: what one pipeline stage runs.
#include <cstdint>
#include <string>

namespace orzo {

struct LayerRange {
  int64_t begin = 0, end = 0;  // [begin, end)
};

// `range` inside a model of `layers` layers, end == 0 meaning the last; throws
// std::invalid_argument when it is empty or reaches outside.
LayerRange resolve_range(LayerRange range, int64_t layers);

// "begin-end", as placements, worker flags, health and error messages name a range.
std::string layers_text(const LayerRange& range);

}  // namespace orzo
