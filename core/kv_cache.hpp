#pragma once
// The paged KV cache of one layer range: fixed-size blocks of token slots, addressed by
// the block ids of each sequence's block table. Allocated once; the block manager (in the
// batcher) decides which ids a sequence owns.
//
// Within a block, values are stored slot by slot (kv_dim floats per token) and keys
// transposed, dimension by dimension (block_size floats per dimension): attention scores a
// chunk of consecutive keys against a query, and with the keys of a chunk side by side one
// vector load brings a dimension of all of them.
//
// The storage comes from calloc: the kernel hands out zero pages as slots are first written,
// so a pool sized for every sequence at full context costs no time to create and no memory
// until it is used (zero-filling it took a stories260K `orzo generate` 0.4 s of its 0.6 s).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace orzo {

inline constexpr int32_t kDefaultBlockSize = 16;

class KvCache {
 public:
  KvCache(int64_t layers, int32_t num_blocks, int32_t block_size, int64_t kv_dim);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return 2 * floats_ * sizeof(float); }

  // Stores one token's kv_dim keys and values, for `layer` counted from the range's first layer.
  void write(int64_t layer, int32_t block, int32_t slot, const float* key, const float* value);

  // A block's keys: key i of slot s is at keys(layer, block)[i * block_size() + s].
  const float* keys(int64_t layer, int32_t block) const { return keys_.get() + offset(layer, block, 0); }
  float key(int64_t layer, int32_t block, int32_t slot, int64_t i) const {
    return keys(layer, block)[static_cast<size_t>(i) * static_cast<size_t>(block_size_) + static_cast<size_t>(slot)];
  }
  // The kv_dim values of one token slot.
  const float* value(int64_t layer, int32_t block, int32_t slot) const { return values_.get() + offset(layer, block, slot); }

 private:
  size_t offset(int64_t layer, int32_t block, int32_t slot) const {
    return ((static_cast<size_t>(layer) * static_cast<size_t>(num_blocks_) + static_cast<size_t>(block)) *
                static_cast<size_t>(block_size_) +
            static_cast<size_t>(slot)) *
           static_cast<size_t>(kv_dim_);
  }

  struct Free {
    void operator()(float* p) const { std::free(p); }
  };

  int32_t num_blocks_, block_size_;
  int64_t kv_dim_;
  size_t floats_;  // of keys_, and of values_
  std::unique_ptr<float[], Free> keys_, values_;
};

}  // namespace orzo
