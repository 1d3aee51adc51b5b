#pragma once
// A whole file's bytes, read-only, for the lifetime of the object. Weights are mapped rather
// than read so a multi-gigabyte model costs page cache, not heap, and TensorViews can point
// straight into it; holders of views keep the shared_ptr alive.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orzo {

class MappedFile {
 public:
  // Throws LoadError naming the path and the system's reason (missing, a directory, ...).
  static std::shared_ptr<const MappedFile> open(const std::string& path);

  // A copy of bytes already in memory, shown in errors as `display_name`: the parsers'
  // entry point for fuzzers and tests, which must not need a file on disk.
  static std::shared_ptr<const MappedFile> from_bytes(std::string display_name, const void* data, size_t size);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  explicit MappedFile(std::string path) : path_(std::move(path)) {}

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // data_ is an mmap to unmap, not a pointer into copy_
  std::vector<uint8_t> copy_;
};

// Tells the kernel that the pages wholly inside [data, data + bytes) will not be read for a
// while (a backend holds its own copy of those weights), so it may reclaim them; a later
// read brings them back. Never loses contents (MADV_PAGEOUT, not MADV_DONTNEED), so any
// memory may be named; a no-op where the kernel cannot.
void release_pages(const void* data, size_t bytes);

}  // namespace orzo
