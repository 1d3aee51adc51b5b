#pragma once
// The paged KV cache of one layer range: fixed-size blocks of token slots, addressed by
// the block ids of each sequence's block table. Allocated once; the block manager (in the
// batcher) decides which ids a sequence owns.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orzo {

inline constexpr int32_t kDefaultBlockSize = 16;

class KvCache {
 public:
  KvCache(int64_t layers, int32_t num_blocks, int32_t block_size, int64_t kv_dim);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

  // The kv_dim floats of one token slot, for `layer` counted from the range's first layer.
  float* key(int64_t layer, int32_t block, int32_t slot) { return keys_.data() + offset(layer, block, slot); }
  float* value(int64_t layer, int32_t block, int32_t slot) { return values_.data() + offset(layer, block, slot); }

 private:
  size_t offset(int64_t layer, int32_t block, int32_t slot) const {
    return ((static_cast<size_t>(layer) * static_cast<size_t>(num_blocks_) + static_cast<size_t>(block)) *
                static_cast<size_t>(block_size_) +
            static_cast<size_t>(slot)) *
           static_cast<size_t>(kv_dim_);
  }

  int32_t num_blocks_, block_size_;
  int64_t kv_dim_;
  std::vector<float> keys_, values_;
};

}  // namespace orzo
