#pragma once
// How `orzo perplexity` covers a text longer than one context: windows of at most `ctx`
// tokens starting every `stride` tokens, as Hugging Face's "perplexity of fixed-length
// models" does it. Each window scores only the tokens no earlier window scored, each given
// the tokens before it in its window, so a window's first token is never scored by it.
// stride == ctx gives disjoint windows: the first token of each goes unscored, and a token
// early in a window sees little context. A smaller stride gives every scored token at least
// ctx - stride tokens of context, for ctx / stride times the compute. Perplexity is
// exp(-mean logprob) over the scored tokens. Pure logic.
#include <cstdint>
#include <vector>

namespace orzo {

struct ScoringWindow {
  int64_t begin = 0;         // the window's tokens: [begin, end)
  int64_t end = 0;
  int64_t first_scored = 0;  // it scores the tokens [first_scored, end)
};

// Throws std::invalid_argument unless tokens >= 2, ctx >= 2 and 1 <= stride <= ctx.
std::vector<ScoringWindow> scoring_windows(int64_t tokens, int64_t ctx, int64_t stride);

}  // namespace orzo
