#include "core/page_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <utility>

namespace orzo {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

PageMemory::PageMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  mapped_ = (bytes + page - 1) / page * page;
  // Where a huge page fits, the mapping starts on one: what maps beyond it, before and after,
  // is unmapped again, so the kernel can back every 2 MiB of the buffer with one page.
  const size_t slack = mapped_ >= kHugePage ? kHugePage : 0;
  void* const at = ::mmap(nullptr, mapped_ + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) throw std::bad_alloc();
  auto* const begin = static_cast<uint8_t*>(at);
  data_ = begin;
  if (slack > 0) {
    const auto address = reinterpret_cast<uintptr_t>(begin);
    data_ = reinterpret_cast<uint8_t*>((address + kHugePage - 1) & ~(kHugePage - 1));
    if (data_ > begin) ::munmap(begin, static_cast<size_t>(data_ - begin));
    const size_t after = slack - static_cast<size_t>(data_ - begin);
    if (after > 0) ::munmap(data_ + mapped_, after);
#ifdef MADV_HUGEPAGE
    ::madvise(data_, mapped_, MADV_HUGEPAGE);  // a kernel without THP refuses; 4 KiB pages serve
#endif
  }
}

PageMemory::~PageMemory() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

PageMemory::PageMemory(PageMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

PageMemory& PageMemory::operator=(PageMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace orzo
