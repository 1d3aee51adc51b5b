"""Hugging Face's "perplexity of fixed-length models" loop, for the tests that hold `orzo
perplexity` to it (tests/cli/test_perplexity.py over the server's scores, and
tests/runtime/test_perplexity.py over transformers')."""
import math


def hf_windowed_perplexity(ids, ctx, stride, score_window):
    """Perplexity and scored-token count of `ids` in windows of `ctx` every `stride`;
    score_window(window) gives the logprob of each token of a window after its first."""
    nll, count, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + ctx, len(ids))
        logprobs = score_window(ids[begin:end])
        for j in range(1, end - begin):
            if begin + j >= prev_end:
                nll -= logprobs[j - 1]
                count += 1
        prev_end = end
        if end == len(ids):
            break
    return math.exp(nll / count), count
