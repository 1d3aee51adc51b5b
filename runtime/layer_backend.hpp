#pragma once
// What a worker runs: a contiguous range of a model's layers on one device. The range
// that starts at layer 0 also embeds tokens; the range that ends at the last layer also
// applies the final norm and the LM head. One range covering every layer is a whole model.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/draw_plan.hpp"
#include "core/dtype.hpp"
#include "core/forward_batch.hpp"
#include "core/layer_range.hpp"
#include "runtime/sampler.hpp"

namespace orzo {

class LayerBackend {
 public:
  virtual ~LayerBackend() = default;

  virtual LayerRange range() const = 0;
  virtual bool embeds() const = 0;
  virtual bool produces_logits() const = 0;
  virtual int32_t kv_blocks() const = 0;  // size of this range's KV pool; the batcher owns the ids
  // The groups of block tables its steps carry (core/kv_layout.hpp's windows).
  virtual std::vector<int32_t> kv_windows() const { return {0}; }
  virtual size_t kv_bytes() const { return 0; }  // what its KV pool takes (on the device it runs on)
  virtual DType kv_dtype() const { return DType::F32; }  // what its KV pool's elements are

  // hidden: [rows, hidden_size] f32, read unless this range embeds, then overwritten with
  // this range's output. logits: resized to [logit_rows, vocab] when this range produces them.
  // Throws std::invalid_argument on a malformed batch (bad token id, position past its block table).
  virtual void forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) = 0;

  // A last range on a GPU draws the tokens on its device, so that only token ids leave it:
  // the worker then hands it each logit row's plan instead of sampling the logits itself.
  virtual bool samples() const { return false; }
  // forward, then one token per logit row as plans[i] says (the CPU Sampler's semantics).
  virtual void forward_and_sample(const ForwardBatch& batch, std::vector<float>& hidden,
                                  const std::vector<DrawPlan>& plans, std::vector<SampleResult>& out);
};

}  // namespace orzo
