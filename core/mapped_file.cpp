#include "core/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/load_error.hpp"

namespace orzo {

namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw LoadError(path + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of open(): the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) fail(path, "cannot open", errno);
  const Fd fd{raw};
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, "cannot stat", errno);
  if (S_ISDIR(st.st_mode)) fail(path, "cannot map", EISDIR);
  if (!S_ISREG(st.st_mode)) fail(path, "cannot map (not a regular file)", EINVAL);

  std::shared_ptr<MappedFile> file(new MappedFile(path));
  file->size_ = static_cast<size_t>(st.st_size);
  // mmap refuses length 0; an empty file is still a valid (if useless) file.
  if (file->size_ == 0) return file;
  void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) fail(path, "cannot mmap", errno);
  file->data_ = static_cast<const uint8_t*>(p);
  file->mapped_ = true;
  return file;
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::string display_name, const void* data, size_t size) {
  std::shared_ptr<MappedFile> file(new MappedFile(std::move(display_name)));
  const auto* bytes = static_cast<const uint8_t*>(data);
  file->copy_.assign(bytes, bytes + size);
  file->data_ = file->copy_.data();
  file->size_ = size;
  return file;
}

void release_pages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  // A hint: where the kernel refuses it (EINVAL before Linux 5.4), the pages simply stay.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT);
#else
  (void)data, (void)bytes;
#endif
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace orzo
