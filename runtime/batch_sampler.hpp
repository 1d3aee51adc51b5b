#pragma once
// The sampling state of every sequence a worker samples for: one seeded Sampler and the
// token history its penalties read. It lives on the last worker of the pipeline, so that
// only token ids travel back to the batcher; sequences come and go with the steps.

#include "core/draw_plan.hpp"
#include "core/forward_batch.hpp"
#include "core/sampling_params.hpp"
#include "runtime/sampler.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace orzo {

class BatchSampler {
 public:
  // Throws std::invalid_argument for params the Sampler cannot run (see sampling_problem).
  void start(uint64_t seq, const SamplingParams& params, std::vector<int32_t> prompt);
  void release(uint64_t seq);
  size_t size() const { return seqs_.size(); }

  // Records each row's token at its position in its sequence's history, then answers each
  // logit row from `logits` ([logit_rows, vocab], used as scratch): a row whose next position
  // still lies in its prompt scores that prompt token (Sampler::score, with the sequence's
  // prompt_logprobs alternatives); any other row draws the next token. seq_ids names the
  // sequence of each block table. Throws std::invalid_argument for a sequence never started.
  void sample(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, float* logits, int32_t vocab,
              std::vector<SampleResult>& out);

  // The same bookkeeping as sample, for a sampler that draws elsewhere (on a GPU): records the
  // rows' tokens, then gives each logit row its plan: a score row names its prompt token
  // (DrawPlan::score_token), a draw advances its sequence's step.
  void plan(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, std::vector<DrawPlan>& out);

 private:
  struct Entry {
    Sampler sampler;
    std::vector<int32_t> history;  // prompt then generated, by position
    size_t prompt_len = 0;
  };
  Entry& entry(uint64_t seq);
  void record(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids);
  // The sequence of logit row i, and how many of its tokens precede the token it predicts.
  std::pair<Entry*, size_t> logit_row(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, size_t i);
  // A row predicting a prompt token scores it.
  static bool scores(const Entry& e, size_t seen) { return seen < e.prompt_len; }

  std::unordered_map<uint64_t, Entry> seqs_;
};

}  // namespace orzo
