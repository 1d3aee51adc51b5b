// Emulated device and pinned memory, and the copies between them. Device memory is mapped
// with a guard page right after its (256-byte aligned) end, so a kernel that reads or writes
// past an allocation faults there, and it starts as NaN bytes, as unwritten GPU memory holds
// garbage. Copies check their direction against where the pointers live and that they stay
// inside their allocations; they keep CUDA's ordering: a copy to or from pinned or device
// memory waits in its stream, a copy from pageable memory takes its bytes at the call, and one
// to pageable memory waits for the stream and completes before the call returns.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda_cpu/runtime_state.hpp"

namespace orzo::cuda_cpu {

namespace {

constexpr size_t kAlignment = 256;               // cudaMalloc's
constexpr size_t kPoisonedBytes = size_t{1} << 30;  // larger pools (a KV cache sized to the device) stay untouched

struct Allocation {
  size_t bytes;  // usable, rounded up to kAlignment
  int device;    // -1: pinned host memory
  char* mapping;
  size_t mapping_bytes;
};

std::mutex memory_mutex;
std::map<uintptr_t, Allocation> allocations;  // by start
size_t in_use[kDevices] = {};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

const Allocation* find(const void* p, uintptr_t* start) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(at);
  if (it == allocations.begin()) return nullptr;
  --it;
  if (at >= it->first + it->second.bytes) return nullptr;
  *start = it->first;
  return &it->second;
}

cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  bool dst_inside = true, src_inside = true;
  const Memory to = memory_at(dst, bytes, &dst_inside), from = memory_at(src, bytes, &src_inside);
  if (!dst_inside || !src_inside) return fail(cudaErrorInvalidValue);
  const bool to_device = to == Memory::device, from_device = from == Memory::device;
  switch (kind) {
    case cudaMemcpyHostToDevice: return to_device && !from_device ? cudaSuccess : fail(cudaErrorInvalidMemcpyDirection);
    case cudaMemcpyDeviceToHost: return !to_device && from_device ? cudaSuccess : fail(cudaErrorInvalidMemcpyDirection);
    case cudaMemcpyDeviceToDevice: return to_device && from_device ? cudaSuccess : fail(cudaErrorInvalidMemcpyDirection);
    case cudaMemcpyHostToHost: return !to_device && !from_device ? cudaSuccess : fail(cudaErrorInvalidMemcpyDirection);
    case cudaMemcpyDefault: return cudaSuccess;
  }
  return fail(cudaErrorInvalidMemcpyDirection);
}

Op copy_op(void* dst, const void* src, size_t bytes) {
  return [dst, src, bytes] {
    std::memmove(dst, src, bytes);
    return std::string();
  };
}

}  // namespace

Memory memory_at(const void* p, size_t bytes, bool* inside, int* device) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  uintptr_t start = 0;
  const Allocation* a = find(p, &start);
  if (!a) return Memory::pageable;
  if (inside) *inside = reinterpret_cast<uintptr_t>(p) + bytes <= start + a->bytes;
  if (device) *device = a->device;
  return a->device < 0 ? Memory::pinned : Memory::device;
}

size_t device_bytes_in_use(int device) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  return in_use[device];
}

}  // namespace orzo::cuda_cpu

using namespace orzo::cuda_cpu;

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (const cudaError_t e = forbidden_in_capture()) return e;
  const size_t usable = round_up(bytes ? bytes : 1, kAlignment);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapping_bytes = round_up(usable, page) + page;
  const int device = current_device();
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    if (in_use[device] + usable > kDeviceBytes) return fail(cudaErrorMemoryAllocation);
    in_use[device] += usable;
  }
  void* m = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    std::lock_guard<std::mutex> lock(memory_mutex);
    in_use[device] -= usable;
    return fail(cudaErrorMemoryAllocation);
  }
  char* mapping = static_cast<char*>(m);
  mprotect(mapping + mapping_bytes - page, page, PROT_NONE);
  char* p = mapping + mapping_bytes - page - usable;
  if (usable <= kPoisonedBytes) std::memset(p, 0xff, usable);
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{usable, device, mapping, mapping_bytes};
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (const cudaError_t e = forbidden_in_capture()) return e;
  const cudaError_t drained = drain_device(current_device());  // cudaFree waits for the device
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    const auto it = allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations.end() || it->second.device < 0) return fail(cudaErrorInvalidDevicePointer);
    a = it->second;
    allocations.erase(it);
    in_use[a.device] -= a.bytes;
  }
  munmap(a.mapping, a.mapping_bytes);
  return drained;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  if (const cudaError_t e = forbidden_in_capture()) return e;
  const size_t usable = round_up(bytes ? bytes : 1, kAlignment);
  void* p = std::aligned_alloc(kAlignment, usable);
  if (!p) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(memory_mutex);
  allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{usable, -1, static_cast<char*>(p), usable};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (const cudaError_t e = forbidden_in_capture()) return e;
  const cudaError_t drained = drain_device(current_device());
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    const auto it = allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations.end() || it->second.device >= 0) return fail(cudaErrorInvalidValue);
    allocations.erase(it);
  }
  std::free(ptr);
  return drained;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = forbidden_in_capture()) return e;
  if (const cudaError_t e = check_copy(dst, src, bytes, kind)) return e;
  // On the legacy stream: after what is queued there, and done when the call returns.
  const cudaError_t drained = drain(nullptr);
  if (bytes > 0) std::memmove(dst, src, bytes);  // an empty vector's data() may be null
  return drained;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_copy(dst, src, bytes, kind)) return e;
  if (bytes == 0) return cudaSuccess;
  if (memory_at(dst, bytes) == Memory::pageable) {
    if (const cudaError_t e = drain(stream)) return e;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (memory_at(src, bytes) == Memory::pageable) {
    auto snapshot = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    return enqueue(stream, [dst, snapshot] {
      std::memcpy(dst, snapshot->data(), snapshot->size());
      return std::string();
    });
  }
  return enqueue(stream, copy_op(dst, src, bytes));
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  bool dst_inside = true, src_inside = true;
  int dst_owner = -1, src_owner = -1;
  if (memory_at(dst, bytes, &dst_inside, &dst_owner) != Memory::device || !dst_inside || dst_owner != dst_device ||
      memory_at(src, bytes, &src_inside, &src_owner) != Memory::device || !src_inside || src_owner != src_device)
    return fail(cudaErrorInvalidValue);
  return enqueue(stream, copy_op(dst, src, bytes));
}

namespace {
cudaError_t check_set(void* ptr, size_t bytes) {
  bool inside = true;
  if (memory_at(ptr, bytes, &inside) != Memory::device || !inside) return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
Op set_op(void* ptr, int value, size_t bytes) {
  return [ptr, value, bytes] {
    std::memset(ptr, value, bytes);
    return std::string();
  };
}
}  // namespace

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (const cudaError_t e = forbidden_in_capture()) return e;
  if (const cudaError_t e = check_set(ptr, bytes)) return e;
  return enqueue(nullptr, set_op(ptr, value, bytes));  // asynchronous to the host, for device memory
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check_set(ptr, bytes)) return e;
  return enqueue(stream, set_op(ptr, value, bytes));
}
