#pragma once
// The pool a kernel benchmark runs on: `threads` threads (0: one per core) unless
// ORZO_BENCH_THREADS names a count. 1 measures one core, which a machine shared with other
// jobs disturbs less than a pool whose threads wait for each other. A program asks with one
// count; the first call's makes the pool.
#include <algorithm>
#include <cstdlib>

#include "core/thread_pool.hpp"

namespace orzo::bench {

inline ThreadPool& bench_pool(int threads) {
  static ThreadPool pool([threads] {
    const char* env = std::getenv("ORZO_BENCH_THREADS");
    return env ? std::max(1, std::atoi(env)) : threads;
  }());
  return pool;
}

}  // namespace orzo::bench
