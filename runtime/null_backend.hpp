#pragma once
// A layer backend that does no math, for measuring what the runtime around the model costs
// (`orzo bench --backend null`): it "predicts" token (t + 1) mod vocab after token t, so a
// greedy request counts upwards and every output is checkable.

#include "runtime/layer_backend.hpp"

namespace orzo {

class NullBackend final : public LayerBackend {
 public:
  NullBackend(int32_t vocab, int32_t kv_blocks) : vocab_(vocab), kv_blocks_(kv_blocks) {}

  LayerRange range() const override { return {0, 1}; }
  bool embeds() const override { return true; }
  bool produces_logits() const override { return true; }
  int32_t kv_blocks() const override { return kv_blocks_; }
  void forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) override;

 private:
  int32_t vocab_, kv_blocks_;
};

}  // namespace orzo
