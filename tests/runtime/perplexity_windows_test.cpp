// The windows `orzo perplexity` scores a long text in (Hugging Face's sliding-window rule):
// every token after the first scored exactly once, with as much context as the window gives.

#include "runtime/perplexity_windows.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace orzo {
namespace {

TEST(ScoringWindows, DisjointWindowsWhenTheStrideIsTheWindow) {
  const auto w = scoring_windows(10, 4, 4);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 4);
  EXPECT_EQ(w[0].first_scored, 1);
  EXPECT_EQ(w[1].begin, 4);
  EXPECT_EQ(w[1].first_scored, 5);  // token 4 has nothing before it in its window
  EXPECT_EQ(w[2].begin, 8);
  EXPECT_EQ(w[2].end, 10);
  EXPECT_EQ(w[2].first_scored, 9);
}

TEST(ScoringWindows, OverlappingWindowsScoreOnlyWhatIsNew) {
  const auto w = scoring_windows(10, 6, 2);
  // [0,6) scores 1..5; [2,8) 6..7; [4,10) 8..9.
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[1].begin, 2);
  EXPECT_EQ(w[1].first_scored, 6);
  EXPECT_EQ(w[2].begin, 4);
  EXPECT_EQ(w[2].end, 10);
  EXPECT_EQ(w[2].first_scored, 8);
}

// Each token at most once, with at least ctx - stride tokens of context; with overlapping
// windows every token but the text's first, with disjoint ones all but each window's first.
TEST(ScoringWindows, EveryTokenAtMostOnceWithEnoughContext) {
  for (int64_t n : {2, 3, 17, 100}) {
    for (int64_t ctx : {2, 5, 16, 200}) {
      for (int64_t stride = 1; stride <= ctx; stride += (stride < 4 ? 1 : 7)) {
        SCOPED_TRACE(::testing::Message() << n << " tokens, ctx " << ctx << ", stride " << stride);
        std::vector<int> times(static_cast<size_t>(n), 0);
        for (const auto& win : scoring_windows(n, ctx, stride)) {
          EXPECT_LE(win.end - win.begin, ctx);
          EXPECT_GT(win.first_scored, win.begin);
          for (int64_t t = win.first_scored; t < win.end; ++t) {
            ++times[static_cast<size_t>(t)];
            // At least ctx - stride tokens before it, or everything before it.
            EXPECT_GE(t - win.begin, std::min(t, ctx - stride));
          }
        }
        EXPECT_EQ(times[0], 0);
        for (int64_t t = 1; t < n; ++t) {
          const bool window_start = stride == ctx && t % ctx == 0;
          EXPECT_EQ(times[static_cast<size_t>(t)], window_start ? 0 : 1) << t;
        }
      }
    }
  }
}

TEST(ScoringWindows, RefusesWhatCannotBeScored) {
  EXPECT_THROW(scoring_windows(1, 4, 4), std::invalid_argument);
  EXPECT_THROW(scoring_windows(10, 1, 1), std::invalid_argument);
  EXPECT_THROW(scoring_windows(10, 4, 0), std::invalid_argument);
  EXPECT_THROW(scoring_windows(10, 4, 5), std::invalid_argument);
}

}  // namespace
}  // namespace orzo
