#pragma once
// The CUDA kernel language on the CPU emulator (kernels/cuda_cpu/): what nvcc adds to C++ for
// device code, for the kernels of kernels/cuda/ to compile unchanged with the host compiler.
// Two constructs no header can give C++, the <<<...>>> launch and __shared__ declarations,
// are rewritten by translate.py, the emulator's front end; everything else is here.
//
// Each CUDA thread of a block runs as a fiber with its own stack, and switches only where
// CUDA lets threads wait for each other: __syncthreads, __syncwarp and the warp collectives
// (*_sync). So a missing barrier, a collective some lanes never reach, or lanes meeting at
// different barriers shows as a wrong result or a reported fault, never as a lucky order:
// the threads between two such points run in a shuffled order, and shared memory starts
// every block as NaN bytes.
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// translate.py rewrites every __shared__ declaration; one left over names this error.
#define __shared__ __shared___outside_a_file_translated_by_translate_py

namespace orzo::cuda_cpu {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Where the running CUDA thread is: threadIdx, blockIdx, blockDim and gridDim read it.
struct ThreadPlace {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
// Defined here, constant-initialized, so the compiler reads it straight from the thread's TLS
// block: an `extern thread_local` goes through a TLS wrapper, and GCC 12's UBSan null check
// on the wrapper's result reads the wrong flags and reports a null load that is not there.
inline thread_local const ThreadPlace* current_place = nullptr;
inline const ThreadPlace& place() { return *current_place; }

// The points where a CUDA thread waits for others (block.cpp).
enum class WarpOp : uint8_t { sync, shfl, shfl_up, shfl_down, shfl_xor, ballot, match_any, any, all };
void sync_threads(const char* file, int line);
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line);
unsigned active_mask();
[[noreturn]] void device_fault(const char* what);

// Shared memory of the running block: a __shared__ declaration (named by its place in the
// source) and the launch's dynamic shared memory.
void* block_shared_bytes(const char* key, size_t bytes, size_t align);
void* dynamic_shared_bytes();
template <typename T>
T& block_shared(const char* key) {
  return *static_cast<T*>(block_shared_bytes(key, sizeof(T), alignof(T)));
}
template <typename T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_bytes());
}

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a warp collective moves up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// kernel<<<grid, block, shared, stream>>>(args): checks the configuration now (a bad one is
// cudaGetLastError's), copies the arguments, and queues the grid on the stream.
void enqueue_grid(const void* kernel, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                  std::function<void()> body, const char* file, int line);

template <typename... P>
class Launcher {
 public:
  Launcher(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream, const char* file, int line)
      : kernel_(kernel), grid_(grid), block_(block), shared_(shared), stream_(stream), file_(file), line_(line) {}

  template <typename... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launch passes every parameter");
    auto kernel = kernel_;
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    enqueue_grid(reinterpret_cast<const void*>(kernel), grid_, block_, shared_, stream_,
                 [kernel, params] { std::apply(kernel, params); }, file_, line_);
  }

 private:
  void (*kernel_)(P...);
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
  const char* file_;
  int line_;
};

template <typename... P>
Launcher<P...> launcher(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared = 0, cudaStream_t stream = nullptr,
                        const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return Launcher<P...>(kernel, grid, block, shared, stream, file, line);
}

}  // namespace orzo::cuda_cpu

#define threadIdx (::orzo::cuda_cpu::place().thread_idx)
#define blockIdx (::orzo::cuda_cpu::place().block_idx)
#define blockDim (::orzo::cuda_cpu::place().block_dim)
#define gridDim (::orzo::cuda_cpu::place().grid_dim)
#define warpSize 32

// Barriers and warp collectives. The caller's place in the source goes with each, so that
// lanes meeting at different ones are caught.
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::orzo::cuda_cpu::sync_threads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::orzo::cuda_cpu::warp_collective(::orzo::cuda_cpu::WarpOp::sync, mask, 0, 0, warpSize, file, line);
}
inline unsigned __activemask() { return ::orzo::cuda_cpu::active_mask(); }

#define ORZO_CUDA_CPU_SHUFFLE(name, op)                                                                            \
  template <typename T>                                                                                            \
  T name(unsigned mask, T v, int arg, int width = warpSize, const char* file = __builtin_FILE(),                   \
         int line = __builtin_LINE()) {                                                                            \
    using namespace ::orzo::cuda_cpu;                                                                              \
    return from_bits<T>(warp_collective(WarpOp::op, mask, to_bits(v), arg, width, file, line));                   \
  }
ORZO_CUDA_CPU_SHUFFLE(__shfl_sync, shfl)
ORZO_CUDA_CPU_SHUFFLE(__shfl_up_sync, shfl_up)
ORZO_CUDA_CPU_SHUFFLE(__shfl_down_sync, shfl_down)
ORZO_CUDA_CPU_SHUFFLE(__shfl_xor_sync, shfl_xor)
#undef ORZO_CUDA_CPU_SHUFFLE

inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  using namespace ::orzo::cuda_cpu;
  return static_cast<unsigned>(warp_collective(WarpOp::ballot, mask, predicate != 0, 0, warpSize, file, line));
}
inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace ::orzo::cuda_cpu;
  return static_cast<int>(warp_collective(WarpOp::any, mask, predicate != 0, 0, warpSize, file, line));
}
inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace ::orzo::cuda_cpu;
  return static_cast<int>(warp_collective(WarpOp::all, mask, predicate != 0, 0, warpSize, file, line));
}
template <typename T>
unsigned __match_any_sync(unsigned mask, T v, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace ::orzo::cuda_cpu;
  return static_cast<unsigned>(warp_collective(WarpOp::match_any, mask, to_bits(v), 0, warpSize, file, line));
}

// Atomics: a block's threads switch only at barriers and collectives, so an atomic never
// meets another thread of its block halfway; the builtins keep them atomic across blocks that
// host threads run at once.
#define ORZO_CUDA_CPU_ATOMIC(name, builtin, T) \
  inline T name(T* address, T v) { return builtin(address, v, __ATOMIC_RELAXED); }
#define ORZO_CUDA_CPU_INTEGER_ATOMICS(T)                  \
  ORZO_CUDA_CPU_ATOMIC(atomicAdd, __atomic_fetch_add, T)  \
  ORZO_CUDA_CPU_ATOMIC(atomicSub, __atomic_fetch_sub, T)  \
  ORZO_CUDA_CPU_ATOMIC(atomicAnd, __atomic_fetch_and, T)  \
  ORZO_CUDA_CPU_ATOMIC(atomicOr, __atomic_fetch_or, T)    \
  ORZO_CUDA_CPU_ATOMIC(atomicXor, __atomic_fetch_xor, T)  \
  ORZO_CUDA_CPU_ATOMIC(atomicExch, __atomic_exchange_n, T) \
  inline T atomicCAS(T* address, T compare, T v) {         \
    __atomic_compare_exchange_n(address, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return compare;                                        \
  }                                                        \
  inline T atomicMax(T* address, T v) {                    \
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);    \
    while (old < v && !__atomic_compare_exchange_n(address, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
    return old;                                            \
  }                                                        \
  inline T atomicMin(T* address, T v) {                    \
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);    \
    while (v < old && !__atomic_compare_exchange_n(address, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} \
    return old;                                            \
  }
ORZO_CUDA_CPU_INTEGER_ATOMICS(int)
ORZO_CUDA_CPU_INTEGER_ATOMICS(unsigned int)
ORZO_CUDA_CPU_INTEGER_ATOMICS(unsigned long long)
#undef ORZO_CUDA_CPU_INTEGER_ATOMICS
#undef ORZO_CUDA_CPU_ATOMIC

template <typename F, typename Bits>
F orzo_cuda_cpu_atomic_add_float(F* address, F v) {
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_RELAXED), next;
  do {
    F sum;
    std::memcpy(&sum, &old, sizeof sum);
    sum += v;
    std::memcpy(&next, &sum, sizeof next);
  } while (!__atomic_compare_exchange_n(bits, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  F previous;
  std::memcpy(&previous, &old, sizeof previous);
  return previous;
}
inline float atomicAdd(float* address, float v) { return orzo_cuda_cpu_atomic_add_float<float, uint32_t>(address, v); }
inline double atomicAdd(double* address, double v) { return orzo_cuda_cpu_atomic_add_float<double, uint64_t>(address, v); }

// Integer and bit intrinsics.
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline unsigned __float_as_uint(float f) { return ::orzo::cuda_cpu::from_bits<unsigned>(::orzo::cuda_cpu::to_bits(f)); }
inline float __uint_as_float(unsigned u) { return ::orzo::cuda_cpu::from_bits<float>(u); }
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned>(i)); }

// The _rn arithmetic: the translated kernels are compiled with -ffp-contract=off, so a plain
// operation is the one rounding these promise.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
// Conversions saturate as the device's do; NaN gives 0, and 2^63 for the unsigned 64-bit one.
inline unsigned long long __float2ull_rn(float x) {
  if (x != x) return 1ull << 63;
  const float r = nearbyintf(x);
  if (r <= 0.0f) return 0;
  if (r >= 18446744073709551616.0f) return ~0ull;
  return static_cast<unsigned long long>(r);
}
inline int __float2int_rn(float x) {
  if (x != x) return 0;
  const float r = nearbyintf(x);
  if (r <= -2147483648.0f) return INT32_MIN;
  if (r >= 2147483648.0f) return INT32_MAX;
  return static_cast<int>(r);
}

// The device's min and max overloads, which host C++ has only as std::min and std::max.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
