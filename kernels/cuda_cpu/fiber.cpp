#include "kernels/cuda_cpu/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define ORZO_FIBER_ASAN 1
#endif

#if !defined(__x86_64__)
#error "the CUDA emulator's fibers switch stacks in x86-64 assembly"
#endif

// orzo_cuda_cpu_switch(&save_sp, next_sp): pushes the callee-saved registers, saves the stack
// pointer, loads the other one and pops the same from it. A fresh stack is laid out as if
// switched away from at the trampoline, which calls entry(arg) from r13 and r12. The x87 and
// SSE control words, which the System V ABI also preserves across calls, are left alone: no
// kernel changes them, so every fiber runs with its host thread's, and loading them (ldmxcsr,
// fldcw) was most of a switch's cost.
extern "C" void orzo_cuda_cpu_switch(void** save_sp, void* next_sp);
extern "C" void orzo_cuda_cpu_trampoline();
asm(R"(
  .text
  .p2align 4
  .globl orzo_cuda_cpu_switch
  .hidden orzo_cuda_cpu_switch
  .type orzo_cuda_cpu_switch, @function
orzo_cuda_cpu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size orzo_cuda_cpu_switch, .-orzo_cuda_cpu_switch

  .p2align 4
  .globl orzo_cuda_cpu_trampoline
  .hidden orzo_cuda_cpu_trampoline
  .type orzo_cuda_cpu_trampoline, @function
orzo_cuda_cpu_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size orzo_cuda_cpu_trampoline, .-orzo_cuda_cpu_trampoline
)");

namespace orzo::cuda_cpu {

namespace {
size_t page_bytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
}  // namespace

Fiber::Fiber() {
  void* p = mmap(nullptr, page_bytes() + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  mapping_ = static_cast<char*>(p);
  mprotect(mapping_, page_bytes(), PROT_NONE);  // an overflowing stack faults here
  // Stacks that all began at the same offset in a page would put every fiber's hot frames in
  // one cache set; a switch touches the next fiber's, so they are spread over a page's 64 sets.
  static std::atomic<unsigned> fibers{0};
  color_ = (fibers.fetch_add(1, std::memory_order_relaxed) % 64) * 64;
}

Fiber::~Fiber() { munmap(mapping_, page_bytes() + kStackBytes); }

void Fiber::start(Entry entry, void* arg) {
  const auto top = reinterpret_cast<uintptr_t>(mapping_ + page_bytes() + kStackBytes - color_) & ~uintptr_t{15};
  // After the switch's ret the stack pointer is 16-aligned, as a call instruction expects.
  auto* frame = reinterpret_cast<uint64_t*>(top - 16 - 56);
  frame[0] = 0;  // r15
  frame[1] = 0;  // r14
  frame[2] = reinterpret_cast<uint64_t>(entry);  // r13
  frame[3] = reinterpret_cast<uint64_t>(arg);    // r12
  frame[4] = 0;  // rbx
  frame[5] = 0;  // rbp: ends frame-pointer walks here
  frame[6] = reinterpret_cast<uint64_t>(&orzo_cuda_cpu_trampoline);
  sp_ = frame;
  fake_stack_ = nullptr;
}

void Fiber::resume() {
#ifdef ORZO_FIBER_ASAN
  void* scheduler_fake = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake, mapping_ + page_bytes(), kStackBytes);
#endif
  orzo_cuda_cpu_switch(&scheduler_sp_, sp_);
#ifdef ORZO_FIBER_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake, nullptr, nullptr);
#endif
}

void Fiber::switch_out(bool finishing) {
#ifdef ORZO_FIBER_ASAN
  // The scheduler's stack is known from the first switch into this fiber (below).
  __sanitizer_start_switch_fiber(finishing ? nullptr : &fake_stack_, scheduler_bottom_, scheduler_size_);
#else
  (void)finishing;
#endif
  orzo_cuda_cpu_switch(&sp_, scheduler_sp_);
#ifdef ORZO_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_bottom_, &scheduler_size_);
#endif
}

void Fiber::begin() {
#ifdef ORZO_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_bottom_, &scheduler_size_);
#endif
}

void Fiber::suspend() { switch_out(false); }

void Fiber::finish() {
  switch_out(true);
  __builtin_unreachable();  // never resumed until start() lays out a new frame
}

}  // namespace orzo::cuda_cpu
