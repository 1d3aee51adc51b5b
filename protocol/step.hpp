#pragma once
// batcher -> first worker -> ... -> last worker -> batcher: one forward step.
// Every stage receives the whole request, runs its layers, writes its output hidden states
// into it and passes it on; the last stage samples and replies with a StepResult.

#include "core/forward_batch.hpp"
#include "protocol/generation_request.hpp"
#include "protocol/token_event.hpp"
#include "protocol/wire.hpp"

#include <cstdint>
#include <vector>

namespace orzo {

// Sent with the first step a sequence appears in, for the worker that samples: how it
// draws, and its prompt, which the penalties read (prefix-cached prompt tokens never pass
// as rows). Sent again, with what it drew so far, after a stage was lost: a sampling worker
// that took over resumes the draws (Philox step, output constraint, penalty history) where
// they stood, and one that survived starts the same place over.
struct SequenceStart {
  uint64_t seq = 0;
  SamplingParams sampling;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
};

struct StepRequest {
  uint64_t step = 0;
  ForwardBatch batch;
  std::vector<uint64_t> seq_ids;        // per block table of batch: the sequence it belongs to
  std::vector<SequenceStart> started;   // sequences the sampling worker has not seen yet
  std::vector<uint64_t> released;       // sequences that ended: drop their sampling state
  std::vector<float> hidden;            // [rows, hidden] between stages; empty into the first
};

// A drawn token, or for a row that scores its prompt's next token, that token (rank set).
// Token -1: the sequence's output constraint left no token to draw; the batcher ends it.
struct SampledToken {
  int32_t token = 0;
  f32 logprob;
  std::vector<TopLogprob> top_logprobs;
  int32_t rank = 0;
};

struct StepResult {
  uint64_t step = 0;
  std::vector<SampledToken> samples;    // one per batch.logit_rows entry, in that order (BatchSampler::sample)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForwardBatch& x) {
  return f(caf::meta::type_name("forward_batch"), x.tokens, x.positions, x.seq_index, x.block_tables,
           x.kv_groups, x.logit_rows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SequenceStart& x) {
  return f(caf::meta::type_name("sequence_start"), x.seq, x.sampling, x.prompt, x.generated);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepRequest& x) {
  float_block_ref hidden{x.hidden};
  return f(caf::meta::type_name("step_request"), x.step, x.batch, x.seq_ids, x.started, x.released, hidden);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledToken& x) {
  return f(caf::meta::type_name("sampled_token"), x.token, x.logprob, x.top_logprobs, x.rank);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepResult& x) {
  return f(caf::meta::type_name("step_result"), x.step, x.samples);
}

}  // namespace orzo
