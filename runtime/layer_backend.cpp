#include "runtime/layer_backend.hpp"

#include <stdexcept>

namespace orzo {

void LayerBackend::forward_and_sample(const ForwardBatch&, std::vector<float>&, const std::vector<DrawPlan>&,
                                      std::vector<SampleResult>&) {
  throw std::logic_error("this backend does not sample: call forward and sample its logits");
}

}  // namespace orzo
