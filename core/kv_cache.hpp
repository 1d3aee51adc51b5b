#pragma once
// The paged KV cache of one layer range: fixed-size blocks of token slots, addressed by
// the block ids of each sequence's block tables. Allocated once; the block manager (in the
// batcher) decides which ids a sequence owns. A block holds a plane per layer of the group
// of layers whose table holds it (core/kv_layout.hpp); with one group, a plane per layer.
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
  KvCache(int64_t planes, int32_t num_blocks, int32_t block_size, int64_t kv_dim);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return 2 * floats_ * sizeof(float); }

  // Stores one token's kv_dim keys and values in `plane`.
  void write(int64_t plane, int32_t block, int32_t slot, const float* key, const float* value);

  // A block's keys: key i of slot s is at keys(layer, block)[i * block_size() + s].
  const float* keys(int64_t plane, int32_t block) const { return keys_.get() + offset(plane, block, 0); }
  float key(int64_t plane, int32_t block, int32_t slot, int64_t i) const {
    return keys(plane, block)[static_cast<size_t>(i) * static_cast<size_t>(block_size_) + static_cast<size_t>(slot)];
  }
  // The kv_dim values of one token slot.
  const float* value(int64_t plane, int32_t block, int32_t slot) const { return values_.get() + offset(plane, block, slot); }

 private:
  size_t offset(int64_t plane, int32_t block, int32_t slot) const {
    return ((static_cast<size_t>(plane) * static_cast<size_t>(num_blocks_) + static_cast<size_t>(block)) *
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
