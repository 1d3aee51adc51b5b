#pragma once
// The sampling state of every sequence a worker samples for: one seeded Sampler and the
// token history its penalties read. It lives on the last worker of the pipeline, so that
// only token ids travel back to the batcher; sequences come and go with the steps.

#include "core/draw_plan.hpp"
#include "core/forward_batch.hpp"
#include "core/sampling_params.hpp"
#include "grammar/constraint.hpp"
#include "runtime/sampler.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace orzo {

class BatchSampler {
 public:
  // `constraints` compiles the sequences' output constraints against the model's vocabulary;
  // without it (a stage that has no tokenizer) a constrained sequence draws no token.
  explicit BatchSampler(std::shared_ptr<grammar::ConstraintCache> constraints = nullptr)
      : constraints_(std::move(constraints)) {}

  // Throws std::invalid_argument for params the Sampler cannot run (see sampling_problem).
  // `generated`: what the sequence drew before (a start after a lost stage): its draws go on
  // from that step, its output constraint from where those tokens led it.
  void start(uint64_t seq, const SamplingParams& params, std::vector<int32_t> prompt,
             const std::vector<int32_t>& generated = {});
  void release(uint64_t seq);
  size_t size() const { return seqs_.size(); }

  // Puts in each kPendingToken row the token this sampler drew for that row's position in the
  // step before; token 0 where there is none (that draw was refused, or its step failed): the
  // batcher ends such a sequence and discards the row.
  void fill_pending(ForwardBatch& batch, const std::vector<uint64_t>& seq_ids);

  // Records each row's token at its position in its sequence's history, then answers each
  // logit row from `logits` ([logit_rows, vocab], used as scratch): a row whose next position
  // still lies in its prompt scores that prompt token (Sampler::score, with the sequence's
  // prompt_logprobs alternatives); any other row draws the next token, within its output
  // constraint's mask when it has one. A constrained row that the constraint leaves no token
  // answers token kNoToken. seq_ids names the sequence of each block table. Throws
  // std::invalid_argument for a sequence never started.
  void sample(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, float* logits, int32_t vocab,
              std::vector<SampleResult>& out);

  // The same bookkeeping as sample, for a sampler that draws elsewhere (on a GPU): records the
  // rows' tokens, then gives each logit row its plan: a score row names its prompt token
  // (DrawPlan::score_token), a draw advances its sequence's step and carries its constraint's
  // mask. The plans' masks stay valid until commit(), which must follow the draws: it moves
  // the constraints on by the tokens drawn (kNoToken where a constraint allowed none).
  void plan(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, std::vector<DrawPlan>& out);
  void commit(std::vector<SampleResult>& drawn);

  // Whether every constrained draw of the step finds its mask built. When not, a worker
  // builds them with build_masks on another thread while the forward pass runs: the first
  // visit of a constraint state walks the vocabulary's trie. build_masks touches no state but
  // the constraints' caches, so it may run beside anything but start and release.
  bool masks_ready(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids);
  void build_masks(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids);

  // The token answered for a draw its output constraint allows nothing for.
  static constexpr int32_t kNoToken = -1;

 private:
  struct Entry {
    Sampler sampler;
    std::vector<int32_t> history;  // prompt then generated, by position
    size_t prompt_len = 0;
    std::optional<grammar::ConstraintMatcher> matcher;  // when the output is constrained
    bool unusable = false;  // constrained, but the constraint could not be compiled here
    // The last draw, for fill_pending: its token (kNoToken if refused) and the position it is for.
    int32_t drawn = kNoToken;
    size_t drawn_at = std::numeric_limits<size_t>::max();
  };
  // The constrained draws of a step: the sequence of each logit row that draws under a matcher.
  template <class Visit>
  void for_constrained_draws(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, Visit visit);
  // A constrained draw's mask; null with `refuse` when the draw must answer kNoToken.
  std::shared_ptr<const TokenMask> mask_for(Entry& e, bool& refuse) const;
  Entry& entry(uint64_t seq);
  void record(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids);
  // The sequence of logit row i, and how many of its tokens precede the token it predicts.
  std::pair<Entry*, size_t> logit_row(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, size_t i);
  // A row predicting a prompt token scores it.
  static bool scores(const Entry& e, size_t seen) { return seen < e.prompt_len; }

  std::unordered_map<uint64_t, Entry> seqs_;
  size_t constrained_ = 0;  // entries with a matcher: no other needs masks_ready's scan
  std::shared_ptr<grammar::ConstraintCache> constraints_;
  struct Planned {
    size_t row;  // index into the plans
    Entry* entry;
    bool refuse;
  };
  std::vector<Planned> planned_;  // plan()'s constrained draws, for commit()
  struct PlannedDraw {
    size_t row;  // index into the plans
    Entry* entry;
    size_t position;  // of the token drawn
  };
  std::vector<PlannedDraw> planned_draws_;  // every draw of plan(), for commit() to remember
  std::vector<std::shared_ptr<const TokenMask>> plan_masks_;
};

}  // namespace orzo
