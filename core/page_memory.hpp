#pragma once
// A large buffer that reads as zeros and costs nothing until touched: anonymous pages the
// kernel maps as they are first written, in 2 MiB pages where it gives them (transparent huge
// pages, asked for with madvise, as Linux's default "madvise" mode wants). For the buffers a
// step streams through out of order, the KV cache pool and packed weights: in 4 KiB pages a
// 1 GiB pool spans 256k of them, far past the TLB, and a batcher's block tables, which
// interleave the blocks of sequences that grow together, meet a new page at almost every
// block (stories260K at 64 sessions: decode attention 22 % slower than on the same blocks
// in a row; docs/BENCHMARKS.md, "The KV cache and packed weights in 2 MiB pages").
#include <cstddef>
#include <cstdint>

namespace orzo {

class PageMemory {
 public:
  PageMemory() = default;
  // Throws std::bad_alloc where the address space is refused.
  explicit PageMemory(size_t bytes);
  ~PageMemory();
  PageMemory(PageMemory&& other) noexcept;
  PageMemory& operator=(PageMemory&& other) noexcept;
  PageMemory(const PageMemory&) = delete;
  PageMemory& operator=(const PageMemory&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // whole pages from data_
};

}  // namespace orzo
