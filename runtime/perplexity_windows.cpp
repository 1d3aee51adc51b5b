#include "runtime/perplexity_windows.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace orzo {

std::vector<ScoringWindow> scoring_windows(int64_t tokens, int64_t ctx, int64_t stride) {
  if (tokens < 2) throw std::invalid_argument("the text has " + std::to_string(tokens) + " tokens; scoring needs at least 2");
  if (ctx < 2) throw std::invalid_argument("the window (--ctx) must hold at least 2 tokens, got " + std::to_string(ctx));
  if (stride < 1 || stride > ctx)
    throw std::invalid_argument("the stride must be in [1, " + std::to_string(ctx) + "] (the window), got " +
                                std::to_string(stride));
  std::vector<ScoringWindow> out;
  int64_t scored_to = 1;  // the first token has nothing before it
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + ctx, tokens);
    const int64_t first = std::max(scored_to, begin + 1);  // a window's first token has nothing before it
    if (end > first) out.push_back(ScoringWindow{begin, end, first});
    scored_to = std::max(scored_to, end);
    if (end == tokens) break;
  }
  return out;
}

}  // namespace orzo
