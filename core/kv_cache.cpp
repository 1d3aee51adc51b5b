#include "core/kv_cache.hpp"

#include <cstring>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

namespace orzo {
namespace {

// Key i of a token goes to dst[i * stride].
template <typename T>
void scatter(const void* src, int64_t n, size_t stride, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, static_cast<const uint8_t*>(src) + static_cast<size_t>(i) * sizeof x, sizeof x);
    std::memcpy(dst + static_cast<size_t>(i) * stride * sizeof x, &x, sizeof x);
  }
}

}  // namespace

KvCache::KvCache(int64_t planes, int32_t num_blocks, int32_t block_size, int64_t kv_dim, DType dtype)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      kv_dim_(kv_dim),
      dtype_(dtype),
      elem_bytes_(dtype_block_bytes(dtype)) {
  if (planes < 0 || num_blocks <= 0 || block_size <= 0 || kv_dim <= 0)
    throw std::invalid_argument("KvCache: planes, blocks, block size and kv_dim must be positive (blocks " +
                                std::to_string(num_blocks) + ", block size " + std::to_string(block_size) + ")");
  if (dtype != DType::F32 && dtype != DType::F16)
    throw std::invalid_argument(std::string("KvCache: elements are f32 or f16, not ") + dtype_name(dtype));
  elements_ = static_cast<size_t>(planes) * static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size) *
              static_cast<size_t>(kv_dim);
  if (elements_ > SIZE_MAX / elem_bytes_) throw std::bad_alloc();
  keys_ = PageMemory(elements_ * elem_bytes_);
  values_ = PageMemory(elements_ * elem_bytes_);
}

size_t KvCache::bytes_per_block_plane(int32_t block_size, int64_t kv_dim, DType dtype) {
  return 2 * static_cast<size_t>(block_size) * static_cast<size_t>(kv_dim) * dtype_block_bytes(dtype);
}

void KvCache::write(int64_t plane, int32_t block, int32_t slot, const void* key, const void* value) {
  uint8_t* keys = keys_.data() + (offset(plane, block, 0) + static_cast<size_t>(slot)) * elem_bytes_;
  const auto stride = static_cast<size_t>(block_size_);
  if (dtype_ == DType::F32)
    scatter<uint32_t>(key, kv_dim_, stride, keys);
  else
    scatter<uint16_t>(key, kv_dim_, stride, keys);
  std::memcpy(values_.data() + offset(plane, block, slot) * elem_bytes_, value, static_cast<size_t>(kv_dim_) * elem_bytes_);
}

float KvCache::load(const uint8_t* base, size_t index) const {
  if (dtype_ == DType::F32) {
    float f;
    std::memcpy(&f, base + index * sizeof f, sizeof f);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, base + index * sizeof h, sizeof h);
  return f16_to_f32(h);
}

float KvCache::key(int64_t plane, int32_t block, int32_t slot, int64_t i) const {
  return load(keys_.data(), offset(plane, block, 0) + static_cast<size_t>(i) * static_cast<size_t>(block_size_) +
                               static_cast<size_t>(slot));
}

float KvCache::value_at(int64_t plane, int32_t block, int32_t slot, int64_t i) const {
  return load(values_.data(), offset(plane, block, slot) + static_cast<size_t>(i));
}

}  // namespace orzo
