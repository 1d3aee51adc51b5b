#include "core/kv_cache.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

namespace orzo {

KvCache::KvCache(int64_t planes, int32_t num_blocks, int32_t block_size, int64_t kv_dim)
    : num_blocks_(num_blocks), block_size_(block_size), kv_dim_(kv_dim) {
  if (planes < 0 || num_blocks <= 0 || block_size <= 0 || kv_dim <= 0)
    throw std::invalid_argument("KvCache: planes, blocks, block size and kv_dim must be positive (blocks " +
                                std::to_string(num_blocks) + ", block size " + std::to_string(block_size) + ")");
  floats_ = static_cast<size_t>(planes) * static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size) *
            static_cast<size_t>(kv_dim);
  keys_.reset(static_cast<float*>(std::calloc(floats_, sizeof(float))));
  values_.reset(static_cast<float*>(std::calloc(floats_, sizeof(float))));
  if (floats_ > 0 && (!keys_ || !values_)) throw std::bad_alloc();
}

void KvCache::write(int64_t plane, int32_t block, int32_t slot, const float* key, const float* value) {
  float* keys = keys_.get() + offset(plane, block, 0) + slot;
  for (int64_t i = 0; i < kv_dim_; ++i) keys[static_cast<size_t>(i) * static_cast<size_t>(block_size_)] = key[i];
  std::copy(value, value + kv_dim_, values_.get() + offset(plane, block, slot));
}

}  // namespace orzo
