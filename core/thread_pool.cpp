#include "core/thread_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ORZO_PAUSE() _mm_pause()
#else
#define ORZO_PAUSE() std::this_thread::yield()
#endif

namespace orzo {

namespace {
constexpr int kSpinIterations = 20000;
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  helpers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this, i] { helper_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  try {
    if (job_dynamic_) {
      for (;;) {
        const int64_t begin = next_piece_.fetch_add(job_grain_, std::memory_order_relaxed);
        if (begin >= job_n_) break;
        (*job_)(begin, std::min(job_n_, begin + job_grain_), index);
      }
      return;
    }
    const int64_t blocks = (job_n_ + job_grain_ - 1) / job_grain_;
    const int64_t per = blocks / size(), extra = blocks % size();
    const int64_t first = index * per + std::min<int64_t>(index, extra);
    const int64_t count = per + (index < extra ? 1 : 0);
    const int64_t begin = std::min(job_n_, first * job_grain_);
    const int64_t end = std::min(job_n_, (first + count) * job_grain_);
    if (begin < end) (*job_)(begin, end, index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::helper_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spins < kSpinIterations) {
        ORZO_PAUSE();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) { run(n, fn, grain, false); }

void ThreadPool::parallel_for_dynamic(int64_t n, const RangeFn& fn, int64_t grain) { run(n, fn, grain, true); }

void ThreadPool::run(int64_t n, const RangeFn& fn, int64_t grain, bool dynamic) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (helpers_.empty() || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_dynamic_ = dynamic;
  next_piece_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  pending_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_chunk(0);
  while (pending_.load(std::memory_order_acquire) != 0) ORZO_PAUSE();
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace orzo
