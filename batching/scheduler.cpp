#include "batching/scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace orzo {

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks) : config_(config), blocks_(blocks) {
  auto require = [](int32_t value, const char* name) {
    if (value < 1) throw std::invalid_argument(std::string("SchedulerConfig: ") + name + " must be >= 1, got " + std::to_string(value));
  };
  require(config.max_num_seqs, "max_num_seqs");
  require(config.max_num_batched_tokens, "max_num_batched_tokens");
  require(config.max_waiting, "max_waiting");
  require(config.max_scored_rows, "max_scored_rows");
  running_.reserve(static_cast<size_t>(config.max_num_seqs));
}

bool Scheduler::served_before(const Sequence& a, const Sequence& b) const {
  if (config_.priority && a.priority != b.priority) return a.priority < b.priority;
  return a.arrival < b.arrival;
}

void Scheduler::enqueue(Sequence& seq, bool front) {
  if (config_.priority) {
    auto at = std::upper_bound(waiting_.begin(), waiting_.end(), &seq,
                               [this](const Sequence* a, const Sequence* b) { return served_before(*a, *b); });
    waiting_.insert(at, &seq);
  } else if (front) {
    waiting_.push_front(&seq);
  } else {
    waiting_.push_back(&seq);
  }
}

bool Scheduler::add(Sequence& seq) {
  if (seq.state != Sequence::State::waiting || !seq.blocks.table.empty())
    throw std::invalid_argument("Scheduler::add: sequence " + std::to_string(seq.id) + " is not fresh (already queued, running or finished)");
  if (seq.tokens.empty()) throw std::invalid_argument("Scheduler::add: sequence " + std::to_string(seq.id) + " has no tokens");
  // A request a free running slot takes at the next step is not kept waiting: a burst that
  // arrives between two steps is measured against the queue only beyond those slots.
  const size_t free_slots = running_.size() < static_cast<size_t>(config_.max_num_seqs)
                                ? static_cast<size_t>(config_.max_num_seqs) - running_.size()
                                : 0;
  if (waiting_.size() >= static_cast<size_t>(config_.max_waiting) + free_slots) return false;
  seq.arrival = next_arrival_++;
  seq.num_computed = 0;
  enqueue(seq, false);
  return true;
}

void Scheduler::dequeue(Sequence& seq) {
  if (seq.state == Sequence::State::waiting) {
    if (auto it = std::find(waiting_.begin(), waiting_.end(), &seq); it != waiting_.end()) waiting_.erase(it);
  } else if (seq.state == Sequence::State::running) {
    if (auto it = std::find(running_.begin(), running_.end(), &seq); it != running_.end()) running_.erase(it);
  }
}

void Scheduler::remove(Sequence& seq) {
  dequeue(seq);
  blocks_.release(seq.blocks);
  seq.state = Sequence::State::finished;
}

Sequence& Scheduler::choose_victim() const {
  if (!config_.priority) return *running_.back();
  return **std::max_element(running_.begin(), running_.end(),
                            [this](const Sequence* a, const Sequence* b) { return served_before(*a, *b); });
}

void Scheduler::preempt(Sequence& victim, StepPlan& plan, int32_t& budget) {
  running_.erase(std::find(running_.begin(), running_.end(), &victim));
  auto planned = std::find_if(plan.chunks.begin(), plan.chunks.end(), [&](const ScheduledChunk& c) { return c.seq == &victim; });
  if (planned != plan.chunks.end()) {
    budget += planned->count;
    plan.chunks.erase(planned);
  }
  blocks_.release(victim.blocks);
  victim.num_computed = 0;
  ++victim.preemptions;
  victim.state = Sequence::State::waiting;
  enqueue(victim, true);
  plan.preempted.push_back(&victim);
}

bool Scheduler::reserve(Sequence& seq, int32_t num_tokens, StepPlan& plan, int32_t& budget) {
  while (!blocks_.allocate(seq.blocks, num_tokens, seq.num_computed)) {
    Sequence& victim = choose_victim();
    preempt(victim, plan, budget);
    if (&victim == &seq) return false;
  }
  return true;
}

int32_t Scheduler::scored_rows(const Sequence& seq, int32_t first, int32_t count) {
  return std::max(0, first + count - std::max(first, seq.cacheable));
}

int32_t Scheduler::chunk_limit(const Sequence& seq, int32_t first, int32_t left, int32_t budget, int32_t scored_budget) {
  const int64_t free_rows = std::max(0, seq.cacheable - first);
  return static_cast<int32_t>(std::min<int64_t>({left, budget, free_rows + scored_budget}));
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  plan.chunks.reserve(std::min(running_.size() + waiting_.size(), static_cast<size_t>(config_.max_num_seqs)));
  int32_t budget = config_.max_num_batched_tokens;
  int32_t scored_budget = config_.max_scored_rows;
  // Preemption edits running_, so both phases walk a copy and skip what left it.
  snapshot_.assign(running_.begin(), running_.end());
  for (Sequence* seq : snapshot_) {
    if (budget == 0) break;
    if (seq->state != Sequence::State::running || seq->num_tokens() - seq->num_computed != 1) continue;
    if (!reserve(*seq, seq->num_computed + 1, plan, budget)) continue;
    plan.chunks.push_back({seq, seq->num_computed, 1, true});
    --budget;
  }
  for (Sequence* seq : snapshot_) {
    if (budget == 0) break;
    const int32_t left = seq->num_tokens() - seq->num_computed;
    if (seq->state != Sequence::State::running || left < 2) continue;
    const int32_t count = chunk_limit(*seq, seq->num_computed, left, budget, scored_budget);
    if (count == 0) continue;
    if (!reserve(*seq, seq->num_computed + count, plan, budget)) continue;
    plan.chunks.push_back({seq, seq->num_computed, count, count == left});
    budget -= count;
    scored_budget -= scored_rows(*seq, seq->num_computed, count);
  }
  // A step that had to preempt has no blocks to spare for newcomers (and must not readmit
  // its own victims).
  while (plan.preempted.empty() && !waiting_.empty() && budget > 0 &&
         running_.size() < static_cast<size_t>(config_.max_num_seqs)) {
    Sequence& seq = *waiting_.front();
    // Preempted or parked while a step still computes its old rows: readmitted once that step
    // is answered, so that the step's blocks are registered from the table it wrote.
    if (seq.in_flight > 0) break;
    // Up to `cacheable` tokens: the blocks lying inside [0, cacheable) (see cached_prefix_tokens).
    const int32_t lookup = seq.cacheable < seq.num_tokens() ? seq.cacheable + 1 : seq.num_tokens();
    const int32_t cached = seq.cacheable > 0 ? blocks_.take_cached_prefix(seq.blocks, seq.tokens.data(), lookup) : 0;
    const int32_t count = chunk_limit(seq, cached, seq.num_tokens() - cached, budget, scored_budget);
    if (count == 0 || !blocks_.allocate(seq.blocks, cached + count, cached)) {
      blocks_.release(seq.blocks);
      break;
    }
    waiting_.pop_front();
    seq.num_computed = cached;
    if (seq.preemptions == 0) seq.num_cached = cached;
    seq.state = Sequence::State::running;
    running_.push_back(&seq);
    plan.chunks.push_back({&seq, cached, count, cached + count == seq.num_tokens()});
    budget -= count;
    scored_budget -= scored_rows(seq, cached, count);
  }
  plan.num_tokens = config_.max_num_batched_tokens - budget;
  return plan;
}

void Scheduler::complete(const StepPlan& plan) {
  advance(plan);
  commit(plan);
}

void Scheduler::advance(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    Sequence& seq = *chunk.seq;
    if (seq.state != Sequence::State::running) continue;
    if (chunk.first_pos != seq.num_computed)
      throw std::logic_error("Scheduler::advance: sequence " + std::to_string(seq.id) + " has computed " +
                             std::to_string(seq.num_computed) + " tokens, the plan starts at " +
                             std::to_string(chunk.first_pos) + " (a stale plan?)");
    seq.num_computed += chunk.count;
  }
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    Sequence& seq = *chunk.seq;
    if (seq.state == Sequence::State::running)
      blocks_.commit(seq.blocks, seq.tokens.data(), chunk.first_pos + chunk.count);
  }
}

void Scheduler::park(Sequence& seq) {
  if (seq.state != Sequence::State::waiting && seq.state != Sequence::State::running) return;
  dequeue(seq);
  blocks_.release(seq.blocks);
  seq.num_computed = 0;
  seq.state = Sequence::State::parked;
}

void Scheduler::unpark(Sequence& seq) {
  if (seq.state != Sequence::State::parked)
    throw std::logic_error("Scheduler::unpark: sequence " + std::to_string(seq.id) + " is not parked");
  seq.state = Sequence::State::waiting;
  enqueue(seq, true);
}

void Scheduler::preempt_all() {
  StepPlan unused;
  int32_t budget = 0;
  while (!running_.empty()) preempt(*running_.back(), unused, budget);
}

void Scheduler::hand_off(Sequence& seq) {
  const bool parked = seq.state == Sequence::State::parked;
  park(seq);
  if (!parked && seq.state == Sequence::State::parked) seq.state = Sequence::State::waiting;
}

void Scheduler::adopt(const std::vector<Sequence*>& seqs) {
  for (Sequence* seq : seqs)
    if (seq->state != Sequence::State::waiting || !seq->blocks.table.empty())
      throw std::logic_error("Scheduler::adopt: sequence " + std::to_string(seq->id) + " was not handed off waiting");
  for (Sequence* seq : seqs) seq->arrival = next_arrival_++;
  // Pushed to the front in reverse, so that they keep the order they were served in.
  for (auto it = seqs.rbegin(); it != seqs.rend(); ++it) enqueue(**it, true);
}

bool Scheduler::fits(const Sequence& seq) const {
  return static_cast<int64_t>(seq.tokens.size()) + 1 <= capacity_tokens();
}

int64_t Scheduler::capacity_tokens() const {
  return blocks_.capacity_tokens(config_.max_num_batched_tokens);
}

std::vector<const SequenceBlocks*> Scheduler::live_blocks() const {
  std::vector<const SequenceBlocks*> live;
  live.reserve(running_.size() + waiting_.size());
  for (const Sequence* seq : running_) live.push_back(&seq->blocks);
  for (const Sequence* seq : waiting_) live.push_back(&seq->blocks);
  return live;
}

}  // namespace orzo
