#pragma once
// Continuous batching in the spirit of vLLM V1: every step mixes the decode rows of running
// sequences with chunks of prompts still being prefilled, under a token budget and a cap on
// running sequences. When the KV pool runs dry, the sequence served last is preempted: its
// blocks are released and it returns to the front of the waiting queue, to be recomputed
// later (its full blocks usually still sit in the prefix cache, so recomputing is cheap).
//
// One step, as the batcher drives it:
//   plan = schedule();  run the chunks;  complete(plan);  append sampled tokens;  remove() the finished.
// Planned one step ahead (async scheduling), complete() splits in two: advance(plan) when the
// step goes out, so that the next plan starts where it ends, with a kPendingToken for each
// token it will draw; commit(plan) when it comes back and its KV is written.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "batching/block_manager.hpp"
#include "batching/sequence.hpp"

namespace orzo {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;             // running sequences at most
  int32_t max_num_batched_tokens = 2048;  // rows per step at most
  int32_t max_waiting = 1024;             // add() refuses beyond this many waiting (free running slots aside)
  // Rows per step at most that need their logits to score a prompt (those at or past a
  // sequence's `cacheable`): the logits of a step take rows x vocabulary floats.
  int32_t max_scored_rows = 256;
  bool priority = false;                  // false: FCFS (priority ignored); true: by (priority, arrival)
};

// Rows seq->tokens[first_pos, first_pos + count). sample: the chunk reaches the end of
// seq->tokens, so its last row yields logits.
struct ScheduledChunk {
  Sequence* seq;
  int32_t first_pos;
  int32_t count;
  bool sample;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decode rows first, then prefill chunks
  // Moved back to waiting while planning (blocks released); never also in `chunks`.
  std::vector<Sequence*> preempted;
  int32_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // Throws std::invalid_argument unless every limit in `config` is >= 1.
  Scheduler(SchedulerConfig config, BlockManager& blocks);

  // Queues a sequence (state waiting, no blocks, at least one token; std::invalid_argument
  // otherwise) and stamps its arrival. False, with seq untouched, when max_waiting are waiting
  // besides those the free running slots will take at the next step.
  bool add(Sequence& seq);

  // Takes seq out of whichever queue holds it, releases its blocks and marks it finished.
  // Harmless on a finished sequence. A sequence removed between schedule() and complete()
  // is skipped by complete() (the object must outlive that call).
  void remove(Sequence& seq);

  // Plans one step:
  //  1. running sequences with one token left (decode rows), in admission order; one that
  //     cannot get a block for it preempts the running sequence served last (see below) and
  //     retries; when that victim is the sequence itself, it is the one preempted.
  //  2. running sequences still prefilling: a chunk of min(tokens left, budget), with the
  //     same preemption rule; rows of a prompt being scored also count against
  //     max_scored_rows, and a sequence left no row by it waits for the next step.
  //  3. only when nothing was preempted (the pool is tight), waiting sequences in queue order
  //     while fewer than max_num_seqs run and budget remains: the prefix cache serves what
  //     it can (never past seq.cacheable tokens; not asked at all when that is 0), then a
  //     chunk is allocated; the first that cannot get its blocks, or that a step in flight
  //     still computes (seq.in_flight), stops admission (waiting sequences never preempt).
  // "Served last" is the latest admitted in FCFS mode, the highest (priority, arrival) in
  // priority mode. A victim already planned this step is taken out of the plan again. In
  // FCFS mode a victim goes to the front of the waiting queue; in priority mode the queue
  // stays sorted by (priority, arrival), victims included.
  // Each admission attempt counts as a prefix-cache query, a failed one too.
  StepPlan schedule();

  // The plan ran: advances num_computed by each chunk and registers newly full blocks in
  // the prefix cache. std::logic_error when a chunk no longer starts at its sequence's
  // num_computed (a plan completed twice, or out of order).
  void complete(const StepPlan& plan);
  // complete()'s halves: advance moves num_computed past each chunk of a running sequence
  // (the same std::logic_error), commit registers the blocks each chunk filled. A sequence
  // that left the batch between them is skipped by commit; its object must outlive it.
  void advance(const StepPlan& plan);
  void commit(const StepPlan& plan);

  // Takes a waiting or running sequence out of the batch (its client stopped reading): out of
  // its queue, its blocks released, num_computed 0. Its full blocks stay in the prefix cache
  // while the pool can spare them, so that after unpark() it recomputes little. A sequence
  // parked between schedule() and complete() is skipped by complete(), like a removed one.
  void park(Sequence& seq);
  // Queues a parked sequence again, as a preempted one is (std::logic_error if not parked).
  void unpark(Sequence& seq);

  // Every running sequence back to waiting, to be recomputed (blocks released, num_computed
  // 0), served before those that were waiting already and in the order they were served:
  // the KV they held is gone (a stage was lost). Counts a preemption each.
  void preempt_all();

  // Moving sequences between replicas (each with its own scheduler and KV pool), when the
  // replica serving them was lost. hand_off takes seq out of this scheduler as park does,
  // except that a waiting or running sequence comes out waiting (a parked one stays parked);
  // adopt queues handed-off waiting sequences here, given in the order they were served,
  // ahead of those that only wait (FCFS; by priority otherwise), as preempted ones are. They
  // were admitted already, so adopt never refuses one for the length of the queue.
  void hand_off(Sequence& seq);
  void adopt(const std::vector<Sequence*>& seqs);

  // Whether seq, with one more token, fits the whole pool at all. A sequence that does not
  // would wait forever, holding up admission behind it: the batcher refuses it up front,
  // and ends generation before a sequence's tokens exceed capacity_tokens().
  bool fits(const Sequence& seq) const;
  // The most positions one sequence can ever hold: the batcher caps generation by it.
  int64_t capacity_tokens() const;

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }  // admission order
  std::vector<const SequenceBlocks*> live_blocks() const;              // for BlockManager::check

 private:
  // Grows seq's blocks to `num_tokens` positions, preempting as schedule() describes.
  // False when seq itself had to be preempted.
  bool reserve(Sequence& seq, int32_t num_tokens, StepPlan& plan, int32_t& budget);
  // The longest chunk of seq from `first` that the token budget and the scored-row budget allow.
  static int32_t chunk_limit(const Sequence& seq, int32_t first, int32_t left, int32_t budget, int32_t scored_budget);
  static int32_t scored_rows(const Sequence& seq, int32_t first, int32_t count);
  Sequence& choose_victim() const;
  void dequeue(Sequence& seq);  // out of the waiting or running queue, whichever holds it
  void preempt(Sequence& victim, StepPlan& plan, int32_t& budget);
  void enqueue(Sequence& seq, bool front);
  bool served_before(const Sequence& a, const Sequence& b) const;

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  std::vector<Sequence*> snapshot_;  // running_ at the start of a phase; reused to avoid allocating
  uint64_t next_arrival_ = 0;
};

}  // namespace orzo
