#pragma once
// One kernel grid on the calling host thread: its blocks one after another, each block's
// threads as fibers that meet at barriers and warp collectives (cuda_runtime.h's rules).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace orzo::cuda_cpu {

// The shared memory a block may declare statically, and what it may have with the
// dynamic opt-in (an H100 or H200's 227 KiB).
inline constexpr size_t kStaticSharedBytes = 48 * 1024;
inline constexpr size_t kMaxSharedBytes = 232448;

struct Grid {
  dim3 grid, block;
  size_t dynamic_shared = 0;
  std::function<void()> body;  // the kernel with its arguments, run by every thread
  const char* file = "";       // the launch, for fault messages
  int line = 0;
};

// In which order the threads that may run between two meeting points run: shuffled (the
// default, seeded by the launch's number so that a run repeats), or in thread order forward
// or backward. ORZO_CUDA_CPU_ORDER=shuffle|forward|reverse.
enum class ThreadOrder { shuffle, forward, reverse };
ThreadOrder thread_order();

// Runs every block; empty, or what the first fault was, with its block and thread.
std::string run_grid(const Grid& grid);

}  // namespace orzo::cuda_cpu
