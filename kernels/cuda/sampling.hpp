#pragma once
// Logits to tokens on the GPU, one block per row, so that only token ids (and the logprobs
// asked for) leave the device. The stages and their order are the CPU Sampler's
// (runtime/sampler.hpp), which is this kernel's twin: logprobs of the raw logits; logit bias;
// repetition, frequency and presence penalties over the row's recent tokens; then greedy when
// temperature == 0 or top_k == 1; otherwise weights sampling_weight((logit - max) /
// temperature), top-k (k <= kFastTopK selected in shared memory, larger k by radix select),
// top-p of what top-k left, min-p, and the inverse-CDF draw at philox_uniform(seed, step)
// over the candidates ordered by final logit, ties by ascending token id. With the same
// uniform and the same weights the draws equal the CPU's, except where u falls within
// summation rounding of the boundary between two tokens.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/sampling_params.hpp"

namespace orzo::cuda {

// A row returns as many alternatives as a request may ask for.
using orzo::kMaxTopLogprobs;
inline constexpr int32_t kFastTopK = 64;
// The kernel sums weights in 64-bit fixed point (exact, whatever the order of the additions);
// this bound keeps a whole row's sum inside the integer.
inline constexpr int32_t kMaxSamplingVocab = 1 << 20;

// One row's draw, packed on the host from its SamplingParams and its sampler's state.
struct DeviceDraw {
  float temperature = 1.0f;
  int32_t top_k = 0;          // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;          // the uniform is philox_uniform(seed, step)
  int32_t recent_offset = 0;  // the row's penalty window: recent[recent_offset, + recent_count)
  int32_t recent_count = 0;
  int32_t bias_offset = 0;    // its logit bias: bias_tokens/values[bias_offset, + bias_count)
  int32_t bias_count = 0;
  int32_t logprobs = 0;       // nonzero: report the sampled token's logprob
  int32_t top_logprobs = 0;   // and this many most likely alternatives, 0..kMaxTopLogprobs
  // >= 0: draw nothing; answer this token (a prompt token being scored) with its logprob and
  // rank, as Sampler::score does. Bias, penalties and the uniform are then unused.
  int32_t score_token = -1;
  // >= 0: an output constraint's mask starts at masks[mask_offset] (one bit per token, 64 to a
  // word): every token it does not allow gets -inf before bias and penalties. -1: none.
  int32_t mask_offset = -1;
};

struct DeviceSample {
  int32_t token = 0;
  float logprob = 0;
  int32_t rank = 0;  // score_token rows: 1 + how many tokens have a greater raw logit
  // Most likely first. Entries past the row's top_logprobs (or past its non-NaN logits) hold
  // token -1 and logprob 0.
  int32_t top_tokens[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// Device scratch sample_rows needs for `rows` rows of `vocab` logits: a copy of each raw row,
// for the logprob of the token drawn after bias and penalties have changed the row.
size_t sampling_workspace_bytes(int32_t rows, int32_t vocab);

// logits: [rows, vocab] f32 in device memory, used as scratch; vocab in [1, kMaxSamplingVocab]
// (std::invalid_argument otherwise). draws: [rows]. recent: the tokens the penalties count
// (already cut to each row's window). bias_tokens are inside [0, vocab) (the host drops the
// others, as the CPU sampler skips them). masks: the rows' constraint masks, back to back
// (null when no row has one). out: [rows].
void sample_rows(float* logits, int32_t rows, int32_t vocab, const DeviceDraw* draws, const int32_t* recent,
                 const int32_t* bias_tokens, const float* bias_values, const uint64_t* masks, void* workspace,
                 DeviceSample* out, cudaStream_t stream);

// The kernel's own sampling_weight and philox_uniform, elementwise over device arrays, so that
// the tests can hold them to their host twins bit for bit: out[i] = sampling_weight(x[i]),
// and out[i] = philox_uniform(seed, steps[i]).
void sampling_weights_on_device(const float* x, float* out, int32_t n, cudaStream_t stream);
void philox_uniforms_on_device(uint64_t seed, const uint64_t* steps, float* out, int32_t n,
                               cudaStream_t stream);

}  // namespace orzo::cuda
