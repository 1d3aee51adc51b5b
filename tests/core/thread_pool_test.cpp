#include "core/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace orzo {
namespace {

TEST(ThreadPool, CoversEveryItemOnceWithGrainAlignedChunks) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000, 1001}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(
        n,
        [&](int64_t begin, int64_t end, int) {
          EXPECT_TRUE(begin % 8 == 0);
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
        },
        8);
    for (int h : hits) ASSERT_EQ(h, 1) << "n=" << n;
  }
}

TEST(ThreadPool, DynamicSchedulingCoversEveryItemOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 64, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for_dynamic(
        n,
        [&](int64_t begin, int64_t end, int) {
          EXPECT_LE(end - begin, 4);
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
        },
        4);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "n=" << n;
  }
}

TEST(ThreadPool, RethrowsAWorkerException) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t begin, int64_t, int) {
                                   if (begin > 0) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  int calls = 0;  // the pool is still usable afterwards
  pool.parallel_for(1, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace orzo
