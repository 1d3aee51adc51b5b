#pragma once
// The paged KV cache of one layer range: fixed-size blocks of token slots, addressed by
// the block ids of each sequence's block tables. Allocated once; the block manager (in the
// batcher) decides which ids a sequence owns. A block holds a plane per layer of the group
// of layers whose table holds it (core/kv_layout.hpp); with one group, a plane per layer.
//
// Within a block, values are stored slot by slot (kv_dim elements per token) and keys
// transposed, dimension by dimension (block_size elements per dimension): attention scores a
// chunk of consecutive keys against a query, and with the keys of a chunk side by side one
// vector load brings a dimension of all of them.
//
// Elements are f32, or f16 (KvCache::dtype): half the memory and half the bytes attention
// reads, at f16's rounding of every key and value, as llama.cpp stores them by default.
//
// The storage is PageMemory: the kernel hands out zero pages as slots are first written, so a
// pool sized for every sequence at full context costs no time to create and no memory until
// it is used (zero-filling it took a stories260K `orzo generate` 0.4 s of its 0.6 s), and in
// 2 MiB pages, which block tables that jump between blocks do not run out of the TLB.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/dtype.hpp"
#include "core/page_memory.hpp"

namespace orzo {

inline constexpr int32_t kDefaultBlockSize = 16;

class KvCache {
 public:
  // dtype: F32 or F16 (std::invalid_argument otherwise).
  KvCache(int64_t planes, int32_t num_blocks, int32_t block_size, int64_t kv_dim, DType dtype = DType::F32);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return 2 * elements_ * elem_bytes_; }
  // What one block of one plane takes, keys and values.
  static size_t bytes_per_block_plane(int32_t block_size, int64_t kv_dim, DType dtype);

  // Stores one token's kv_dim keys and values in `plane`, each already in the cache's
  // dtype (kernels/cpu/attention.hpp's store_kv converts f32 rows).
  void write(int64_t plane, int32_t block, int32_t slot, const void* key, const void* value);

  // A block's keys as stored, T the dtype's element (float, or uint16_t f16 bits): key i of
  // slot s is at keys<T>(plane, block)[i * block_size() + s].
  template <typename T>
  const T* keys(int64_t plane, int32_t block) const {
    return element<T>(keys_.data(), offset(plane, block, 0));
  }
  // The kv_dim values of one token slot, as stored.
  template <typename T>
  const T* value(int64_t plane, int32_t block, int32_t slot) const {
    return element<T>(values_.data(), offset(plane, block, slot));
  }
  // The same, writable, for filling a whole block at once (its keys and its values each
  // take block_size() * kv_dim() elements in a row): a copy of other blocks in another dtype.
  template <typename T>
  T* keys(int64_t plane, int32_t block) {
    return const_cast<T*>(std::as_const(*this).keys<T>(plane, block));
  }
  template <typename T>
  T* value(int64_t plane, int32_t block, int32_t slot) {
    return const_cast<T*>(std::as_const(*this).value<T>(plane, block, slot));
  }
  // One key or value element as f32, whatever the dtype.
  float key(int64_t plane, int32_t block, int32_t slot, int64_t i) const;
  float value_at(int64_t plane, int32_t block, int32_t slot, int64_t i) const;

 private:
  size_t offset(int64_t plane, int32_t block, int32_t slot) const {
    return ((static_cast<size_t>(plane) * static_cast<size_t>(num_blocks_) + static_cast<size_t>(block)) *
                static_cast<size_t>(block_size_) +
            static_cast<size_t>(slot)) *
           static_cast<size_t>(kv_dim_);
  }
  template <typename T>
  const T* element(const uint8_t* base, size_t index) const {
    assert(sizeof(T) == elem_bytes_);
    return reinterpret_cast<const T*>(base) + index;
  }
  float load(const uint8_t* base, size_t index) const;

  int32_t num_blocks_, block_size_;
  int64_t kv_dim_;
  DType dtype_;
  size_t elem_bytes_;
  size_t elements_;  // of keys_, and of values_
  PageMemory keys_, values_;
};

}  // namespace orzo
