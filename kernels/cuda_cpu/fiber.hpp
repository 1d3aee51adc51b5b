#pragma once
// A fiber: a stack of its own and a saved stack pointer, switched to and from its scheduler in
// a few instructions (no system call), since an emulated block switches once per thread at
// every barrier and warp collective. The stack is mapped once, with a guard page below it, and
// reused by every CUDA thread that runs on this fiber.
#include <cstddef>

namespace orzo::cuda_cpu {

class Fiber {
 public:
  using Entry = void (*)(void*);
  static constexpr size_t kStackBytes = size_t{256} << 10;

  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares entry(arg) to run from the top of the stack at the next resume. entry must not
  // return: it ends with finish().
  void start(Entry entry, void* arg);
  // From inside the fiber, first thing in entry.
  void begin();
  // From the scheduler: runs the fiber until it suspends or finishes.
  void resume();
  // From inside the fiber: back to the scheduler, to continue here at the next resume.
  void suspend();
  // From inside the fiber, last: back to the scheduler for good (until the next start).
  [[noreturn]] void finish();

 private:
  void switch_out(bool finishing);

  char* mapping_ = nullptr;  // guard page, then the stack
  size_t color_ = 0;         // bytes left unused at the top of the stack
  void* sp_ = nullptr;       // the fiber's stack pointer while it is suspended
  void* scheduler_sp_ = nullptr;
  // AddressSanitizer's view of the switches (unused without it).
  void* fake_stack_ = nullptr;
  const void* scheduler_bottom_ = nullptr;
  size_t scheduler_size_ = 0;
};

}  // namespace orzo::cuda_cpu
