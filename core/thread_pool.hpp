#pragma once
// A fixed set of compute threads for one worker. The caller thread takes part in every
// parallel_for, so a pool of n threads owns n-1 helpers. Workers spin briefly before
// sleeping: a decode step issues hundreds of small parallel regions, and a futex wake-up
// per region would cost more than the region itself.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace orzo {

class ThreadPool {
 public:
  // fn(begin, end, thread_index) handles the items [begin, end).
  using RangeFn = std::function<void(int64_t, int64_t, int)>;

  explicit ThreadPool(int threads);  // threads <= 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  // Splits [0, n) into size() contiguous chunks whose boundaries are multiples of `grain`
  // and runs them concurrently; returns when all are done. Exceptions are rethrown here.
  // For work of even cost per item: each thread touches one contiguous range.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // The same, but threads claim `grain`-sized pieces one at a time until none is left: for
  // items of uneven cost, such as attention rows of a causal prefill.
  void parallel_for_dynamic(int64_t n, const RangeFn& fn, int64_t grain = 1);

 private:
  void run(int64_t n, const RangeFn& fn, int64_t grain, bool dynamic);
  void helper_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  bool job_dynamic_ = false;
  std::atomic<int64_t> next_piece_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace orzo
