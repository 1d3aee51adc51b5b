#include "core/layer_range.hpp"

#include <stdexcept>
#include <string>

namespace orzo {

LayerRange resolve_range(LayerRange r, int64_t layers) {
  if (r.end == 0) r.end = layers;
  if (r.begin < 0 || r.begin >= r.end || r.end > layers)
    throw std::invalid_argument("layer range [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                ") is not inside the model's " + std::to_string(layers) + " layers");
  return r;
}

std::string layers_text(const LayerRange& r) { return std::to_string(r.begin) + "-" + std::to_string(r.end); }

}  // namespace orzo
