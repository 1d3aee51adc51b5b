#include "batching/scheduler.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <numeric>
#include <stdexcept>
#include <limits>
#include <vector>

#include "batching/block_manager.hpp"
#include "batching/sequence.hpp"

namespace orzo {
namespace {

Sequence make_seq(uint64_t id, int32_t prompt_len, int32_t priority = 0) {
  Sequence s;
  s.id = id;
  s.tokens.resize(static_cast<size_t>(prompt_len));
  // Distinct per sequence, so that no two share a prefix unless a test says so.
  std::iota(s.tokens.begin(), s.tokens.end(), static_cast<int32_t>(id) * 1000);
  s.prompt_len = prompt_len;
  s.priority = priority;
  return s;
}

// The step ran: every sampling chunk yields one token.
void finish_step(Scheduler& sched, const StepPlan& plan) {
  sched.complete(plan);
  for (const ScheduledChunk& c : plan.chunks)
    if (c.sample) c.seq->tokens.push_back(7);
}

struct Row {
  const Sequence* seq;
  int32_t first_pos, count;
  bool sample;
  bool operator==(const Row& o) const {
    return seq == o.seq && first_pos == o.first_pos && count == o.count && sample == o.sample;
  }
};

std::vector<Row> rows(const StepPlan& plan) {
  std::vector<Row> out;
  for (const ScheduledChunk& c : plan.chunks) out.push_back({c.seq, c.first_pos, c.count, c.sample});
  return out;
}

std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << "{seq " << r.seq->id << " @" << r.first_pos << " x" << r.count << (r.sample ? " sample}" : "}");
}

SchedulerConfig config(int32_t max_seqs, int32_t max_tokens, int32_t max_waiting = 1024, bool priority = false) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = max_tokens;
  c.max_waiting = max_waiting;
  c.priority = priority;
  return c;
}

TEST(Scheduler, DecodeRowsComeFirstThenPrefillThenAdmissions) {
  BlockManager bm(64, 4);
  Scheduler sched(config(8, 10), bm);
  Sequence a = make_seq(1, 3), b = make_seq(2, 14), c = make_seq(3, 5);
  ASSERT_TRUE(sched.add(a));
  ASSERT_TRUE(sched.add(b));
  StepPlan p1 = sched.schedule();
  EXPECT_EQ(rows(p1), (std::vector<Row>{{&a, 0, 3, true}, {&b, 0, 7, false}}));
  EXPECT_EQ(p1.num_tokens, 10);
  finish_step(sched, p1);
  ASSERT_TRUE(sched.add(c));
  StepPlan p2 = sched.schedule();
  EXPECT_EQ(rows(p2), (std::vector<Row>{{&a, 3, 1, true}, {&b, 7, 7, true}, {&c, 0, 2, false}}));
  EXPECT_EQ(sched.num_running(), 3u);
  finish_step(sched, p2);
  StepPlan p3 = sched.schedule();
  EXPECT_EQ(rows(p3), (std::vector<Row>{{&a, 4, 1, true}, {&b, 14, 1, true}, {&c, 2, 3, true}}));
  bm.check(sched.live_blocks());
}

TEST(Scheduler, TokenBudgetAndSequenceCap) {
  BlockManager bm(64, 4);
  Scheduler sched(config(2, 5), bm);
  Sequence a = make_seq(1, 4), b = make_seq(2, 4), c = make_seq(3, 4);
  for (Sequence* s : {&a, &b, &c}) ASSERT_TRUE(sched.add(*s));
  StepPlan p1 = sched.schedule();
  EXPECT_EQ(rows(p1), (std::vector<Row>{{&a, 0, 4, true}, {&b, 0, 1, false}}));
  EXPECT_EQ(sched.num_running(), 2u);
  EXPECT_EQ(sched.num_waiting(), 1u);
  finish_step(sched, p1);
  StepPlan p2 = sched.schedule();  // c still waits: two are running
  EXPECT_EQ(rows(p2), (std::vector<Row>{{&a, 4, 1, true}, {&b, 1, 3, true}}));
  finish_step(sched, p2);
  sched.remove(a);
  StepPlan p3 = sched.schedule();
  EXPECT_EQ(rows(p3), (std::vector<Row>{{&b, 4, 1, true}, {&c, 0, 4, true}}));
  EXPECT_EQ(p3.num_tokens, 5);
}

TEST(Scheduler, BudgetSmallerThanTheDecodeRows) {
  BlockManager bm(64, 4);
  Scheduler sched(config(8, 2), bm);
  Sequence a = make_seq(1, 1), b = make_seq(2, 1), c = make_seq(3, 1);
  for (Sequence* s : {&a, &b, &c}) ASSERT_TRUE(sched.add(*s));
  finish_step(sched, sched.schedule());  // a, b
  StepPlan p = sched.schedule();
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 1, 1, true}, {&b, 1, 1, true}}));
  EXPECT_EQ(sched.num_waiting(), 1u);
}

TEST(Scheduler, ChunkedPrefillAcrossSteps) {
  BlockManager bm(64, 4);
  Scheduler sched(config(8, 4), bm);
  Sequence a = make_seq(1, 10);
  ASSERT_TRUE(sched.add(a));
  const std::vector<Row> expected[] = {{{&a, 0, 4, false}}, {{&a, 4, 4, false}}, {{&a, 8, 2, true}}, {{&a, 10, 1, true}}};
  for (const std::vector<Row>& step : expected) {
    StepPlan p = sched.schedule();
    EXPECT_EQ(rows(p), step);
    EXPECT_GE(static_cast<int32_t>(a.blocks.table.size()) * 4, step[0].first_pos + step[0].count);
    finish_step(sched, p);
    EXPECT_EQ(a.num_computed, step[0].first_pos + step[0].count);
  }
  EXPECT_EQ(a.tokens.size(), 12u);
  EXPECT_EQ(a.blocks.hashes.size(), 2u);  // positions [0, 11) computed: two full blocks
}

TEST(Scheduler, FcfsIgnoresPriorityAndPriorityModeHonoursIt) {
  for (const bool priority : {false, true}) {
    BlockManager bm(64, 4);
    Scheduler sched(config(1, 100, 1024, priority), bm);
    Sequence low = make_seq(1, 2, 5), high = make_seq(2, 2, 0), high_later = make_seq(3, 2, 0);
    for (Sequence* s : {&low, &high, &high_later}) ASSERT_TRUE(sched.add(*s));
    std::vector<const Sequence*> order;
    for (int i = 0; i < 3; ++i) {
      StepPlan p = sched.schedule();
      ASSERT_EQ(p.chunks.size(), 1u);
      order.push_back(p.chunks[0].seq);
      finish_step(sched, p);
      sched.remove(*p.chunks[0].seq);
    }
    if (priority)
      EXPECT_EQ(order, (std::vector<const Sequence*>{&high, &high_later, &low}));
    else
      EXPECT_EQ(order, (std::vector<const Sequence*>{&low, &high, &high_later}));
  }
}

TEST(Scheduler, RefusesBeyondTheWaitingLimitAndTheFreeRunningSlots) {
  BlockManager bm(64, 4);
  Scheduler sched(config(1, 100, 2), bm);
  Sequence a = make_seq(1, 2), b = make_seq(2, 2), c = make_seq(3, 2), d = make_seq(4, 2);
  EXPECT_TRUE(sched.add(a));  // takes the free running slot at the next step
  EXPECT_TRUE(sched.add(b));
  EXPECT_TRUE(sched.add(c));
  d.arrival = 99;
  EXPECT_FALSE(sched.add(d));
  EXPECT_EQ(d.arrival, 99u);
  EXPECT_EQ(d.state, Sequence::State::waiting);
  EXPECT_EQ(sched.num_waiting(), 3u);
  sched.schedule();  // a runs; b and c fill the queue
  EXPECT_EQ(sched.num_waiting(), 2u);
  EXPECT_FALSE(sched.add(d));
  sched.remove(a);  // its slot is free again
  EXPECT_TRUE(sched.add(d));
  EXPECT_GT(d.arrival, c.arrival);
}

TEST(Scheduler, RejectsBadInput) {
  BlockManager bm(8, 4);
  EXPECT_THROW(Scheduler(config(0, 10), bm), std::invalid_argument);
  EXPECT_THROW(Scheduler(config(1, 0), bm), std::invalid_argument);
  EXPECT_THROW(Scheduler(config(1, 1, 0), bm), std::invalid_argument);
  Scheduler sched(config(8, 100), bm);
  Sequence empty;
  EXPECT_THROW(sched.add(empty), std::invalid_argument);
  Sequence a = make_seq(1, 2);
  ASSERT_TRUE(sched.add(a));
  sched.schedule();
  EXPECT_THROW(sched.add(a), std::invalid_argument);  // running
}

// Pool of 3 blocks of 4: three sequences of 3 tokens fit until each grows past 4.
TEST(Scheduler, PreemptsTheLatestAdmittedAndRecomputesItLater) {
  BlockManager bm(3, 4);
  Scheduler sched(config(8, 100), bm);
  Sequence a = make_seq(1, 3), b = make_seq(2, 3), c = make_seq(3, 3);
  for (Sequence* s : {&a, &b, &c}) ASSERT_TRUE(sched.add(*s));
  finish_step(sched, sched.schedule());
  finish_step(sched, sched.schedule());  // each now has 5 tokens, 4 computed: block 0 full
  EXPECT_EQ(bm.num_free(), 0);
  StepPlan p = sched.schedule();
  // a takes c's block; b then finds none and is itself the last admitted
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 4, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<Sequence*>{&c, &b}));
  EXPECT_EQ(sched.waiting(), (std::deque<Sequence*>{&b, &c}));  // to the front, earlier admitted first
  for (Sequence* s : {&b, &c}) {
    EXPECT_EQ(s->state, Sequence::State::waiting);
    EXPECT_EQ(s->num_computed, 0);
    EXPECT_EQ(s->preemptions, 1);
    EXPECT_TRUE(s->blocks.table.empty());
  }
  bm.check(sched.live_blocks());
  finish_step(sched, p);
  StepPlan p2 = sched.schedule();  // b's full block is still cached, but it needs one more
  EXPECT_EQ(rows(p2), (std::vector<Row>{{&a, 5, 1, true}}));
  finish_step(sched, p2);
  sched.remove(a);
  StepPlan p3 = sched.schedule();
  // b's first block comes from the prefix cache; c's was evicted and one block is left, too few
  EXPECT_EQ(rows(p3), (std::vector<Row>{{&b, 4, 1, true}}));
  EXPECT_EQ(b.num_cached, 0);  // usage counts the first admission only
  finish_step(sched, p3);
  EXPECT_EQ(b.tokens.size(), 6u);
  sched.remove(b);
  StepPlan p4 = sched.schedule();
  EXPECT_EQ(rows(p4), (std::vector<Row>{{&c, 0, 5, true}}));
  bm.check(sched.live_blocks());
}

TEST(Scheduler, PriorityModePreemptsTheLeastImportant) {
  BlockManager bm(2, 4);
  Scheduler sched(config(8, 100, 1024, true), bm);
  Sequence low = make_seq(1, 2, 9), high = make_seq(2, 4, 0);
  ASSERT_TRUE(sched.add(low));
  finish_step(sched, sched.schedule());  // low admitted first
  ASSERT_TRUE(sched.add(high));
  finish_step(sched, sched.schedule());  // low decodes, high prefills: one block each
  StepPlan p = sched.schedule();
  // low was admitted first and is planned first; high's need then preempts it
  EXPECT_EQ(rows(p), (std::vector<Row>{{&high, 4, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<Sequence*>{&low}));
  EXPECT_EQ(p.num_tokens, 1);
  bm.check(sched.live_blocks());
}

TEST(Scheduler, RemoveFromEitherQueue) {
  BlockManager bm(16, 4);
  Scheduler sched(config(1, 100), bm);
  Sequence a = make_seq(1, 6), b = make_seq(2, 6);
  ASSERT_TRUE(sched.add(a));
  ASSERT_TRUE(sched.add(b));
  sched.schedule();
  EXPECT_EQ(bm.num_used(), 2);
  sched.remove(b);  // waiting
  EXPECT_EQ(b.state, Sequence::State::finished);
  EXPECT_EQ(sched.num_waiting(), 0u);
  sched.remove(a);  // running
  EXPECT_EQ(sched.num_running(), 0u);
  EXPECT_EQ(bm.num_used(), 0);
  sched.remove(a);
  sched.remove(b);
  bm.check(sched.live_blocks());
  EXPECT_TRUE(sched.schedule().empty());
}

TEST(Scheduler, CompleteSkipsWhatWasRemovedAfterPlanning) {
  BlockManager bm(16, 4);
  Scheduler sched(config(8, 100), bm);
  Sequence a = make_seq(1, 6), b = make_seq(2, 6);
  ASSERT_TRUE(sched.add(a));
  ASSERT_TRUE(sched.add(b));
  StepPlan p = sched.schedule();
  sched.remove(a);
  sched.complete(p);
  EXPECT_EQ(a.num_computed, 0);
  EXPECT_EQ(b.num_computed, 6);
  bm.check(sched.live_blocks());
}

TEST(Scheduler, ASequenceLargerThanThePoolNeverRunsAndNeverHangs) {
  BlockManager bm(2, 4);
  Scheduler sched(config(8, 100), bm);
  Sequence fits = make_seq(1, 7), too_big = make_seq(2, 9);
  EXPECT_TRUE(sched.fits(fits));
  EXPECT_FALSE(sched.fits(too_big));
  EXPECT_EQ(sched.capacity_tokens(), 8);
  ASSERT_TRUE(sched.add(too_big));
  for (int i = 0; i < 3; ++i) {
    StepPlan p = sched.schedule();
    EXPECT_TRUE(p.empty());
    EXPECT_TRUE(p.preempted.empty());
  }
  EXPECT_EQ(bm.num_used(), 0);
  bm.check(sched.live_blocks());
}

TEST(Scheduler, AdmissionServesTheCachedPrefix) {
  BlockManager bm(16, 4);
  Scheduler sched(config(8, 100), bm);
  Sequence a = make_seq(1, 9), b = make_seq(2, 11);
  std::copy(a.tokens.begin(), a.tokens.end(), b.tokens.begin());
  ASSERT_TRUE(sched.add(a));
  finish_step(sched, sched.schedule());
  ASSERT_TRUE(sched.add(b));
  StepPlan p = sched.schedule();
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 9, 1, true}, {&b, 8, 3, true}}));
  EXPECT_EQ(b.num_cached, 8);
  EXPECT_EQ(b.blocks.table[0], a.blocks.table[0]);
  bm.check(sched.live_blocks());
}

// A prompt being scored needs its rows' logits: the cache serves none of it at cacheable 0
// (and is not even asked), and only whole blocks below `cacheable` otherwise.
TEST(Scheduler, TheCacheServesNoMoreThanASequenceAllows) {
  BlockManager bm(32, 4);
  Scheduler sched(config(8, 100), bm);
  Sequence a = make_seq(1, 17);
  ASSERT_TRUE(sched.add(a));
  finish_step(sched, sched.schedule());
  for (const auto& [cacheable, served] : std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {7, 4}, {8, 8}, {100, 16}}) {
    SCOPED_TRACE(cacheable);
    Sequence b = make_seq(2 + static_cast<uint64_t>(cacheable), 17);
    std::copy_n(a.tokens.begin(), b.tokens.size(), b.tokens.begin());  // a has its sampled token past them
    b.cacheable = cacheable;
    const uint64_t queries = bm.stats().prefix_queries;
    ASSERT_TRUE(sched.add(b));
    StepPlan p = sched.schedule();
    EXPECT_EQ(b.num_cached, served);
    EXPECT_EQ(b.num_computed, served);
    EXPECT_EQ(bm.stats().prefix_queries, queries + (cacheable > 0 ? 1 : 0));
    sched.remove(b);
    bm.check(sched.live_blocks());
  }
}

// Rows that score a prompt need logits: at most max_scored_rows of them per step, whatever
// the token budget leaves; rows below `cacheable` (already scored) and other sequences' rows
// do not count.
TEST(Scheduler, ScoredRowsAreCappedPerStep) {
  BlockManager bm(256, 4);
  SchedulerConfig c = config(8, 1000);
  c.max_scored_rows = 100;
  Scheduler sched(c, bm);
  Sequence a = make_seq(1, 150), b = make_seq(2, 60), plain = make_seq(3, 40);
  a.cacheable = 0;
  b.cacheable = 0;
  ASSERT_TRUE(sched.add(a));
  ASSERT_TRUE(sched.add(b));
  ASSERT_TRUE(sched.add(plain));
  StepPlan p = sched.schedule();
  // a takes the whole scored budget; b, next in line, waits, and so does plain behind it (FCFS).
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 0, 100, false}}));
  finish_step(sched, p);
  a.cacheable = 99;  // the batcher marks what it scored
  p = sched.schedule();
  // plain needs no logits but the sampled row's: the token budget alone holds it.
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 100, 50, true}, {&b, 0, 50, false}, {&plain, 0, 40, true}}));
  finish_step(sched, p);
  a.cacheable = std::numeric_limits<int32_t>::max();
  b.cacheable = 49;
  p = sched.schedule();
  EXPECT_EQ(rows(p), (std::vector<Row>{{&a, 150, 1, true}, {&plain, 40, 1, true}, {&b, 50, 10, true}}));
  bm.check(sched.live_blocks());
}

TEST(Scheduler, RefusesAZeroScoredRowBudget) {
  BlockManager bm(16, 4);
  SchedulerConfig c = config(8, 100);
  c.max_scored_rows = 0;
  EXPECT_THROW(Scheduler(c, bm), std::invalid_argument);
}

// A lost stage: every running sequence goes back to waiting with its tokens, blocks released,
// ahead of those that waited already and in the order they were served.
TEST(Scheduler, PreemptAllRequeuesTheRunningAheadOfTheWaiting) {
  BlockManager blocks(64, 4);
  Scheduler sched(config(2, 64), blocks);
  Sequence a = make_seq(1, 5), b = make_seq(2, 6), c = make_seq(3, 3);
  for (Sequence* s : {&a, &b, &c}) ASSERT_TRUE(sched.add(*s));
  finish_step(sched, sched.schedule());
  ASSERT_EQ(sched.num_running(), 2u);
  EXPECT_EQ(a.num_tokens(), 6);
  sched.preempt_all();
  EXPECT_EQ(sched.num_running(), 0u);
  ASSERT_EQ(sched.waiting(), (std::deque<Sequence*>{&a, &b, &c}));
  for (Sequence* s : {&a, &b}) {
    EXPECT_EQ(s->state, Sequence::State::waiting);
    EXPECT_EQ(s->num_computed, 0);
    EXPECT_EQ(s->preemptions, 1);
    EXPECT_TRUE(s->blocks.table.empty());
  }
  EXPECT_EQ(blocks.num_used(), 0);
  blocks.forget_cached();
  // Recomputed from their tokens, prompt and output alike.
  const auto plan = sched.schedule();
  EXPECT_EQ(rows(plan), (std::vector<Row>{{&a, 0, 6, true}, {&b, 0, 7, true}}));
}

// A sequence whose reader fell behind leaves the batch and its queue, blocks released, and
// comes back at the front of the waiting queue to be recomputed; parked mid-plan, complete()
// skips it.
TEST(Scheduler, AParkedSequenceLeavesTheBatchUntilUnparked) {
  BlockManager blocks(64, 4);
  Scheduler sched(config(4, 64), blocks);
  Sequence a = make_seq(1, 5), b = make_seq(2, 6), c = make_seq(3, 3);
  for (Sequence* s : {&a, &b}) ASSERT_TRUE(sched.add(*s));
  finish_step(sched, sched.schedule());
  const auto plan = sched.schedule();
  ASSERT_EQ(plan.chunks.size(), 2u);
  sched.park(a);
  sched.complete(plan);  // a's chunk is skipped
  EXPECT_EQ(a.state, Sequence::State::parked);
  EXPECT_EQ(a.num_computed, 0);
  EXPECT_TRUE(a.blocks.table.empty());
  EXPECT_EQ(sched.num_running(), 1u);
  ASSERT_TRUE(sched.add(c));
  sched.park(c);  // a waiting one too
  EXPECT_EQ(sched.num_waiting(), 0u);
  EXPECT_THROW(sched.unpark(b), std::logic_error);
  sched.unpark(c);
  sched.unpark(a);
  ASSERT_EQ(sched.waiting(), (std::deque<Sequence*>{&a, &c}));
  // b's sampled token is not appended (the step's result is left out), so it has no row;
  // a's full block comes back from the prefix cache.
  const auto again = sched.schedule();
  EXPECT_EQ(rows(again), (std::vector<Row>{{&a, 4, 2, true}, {&c, 0, 3, true}}));
}

// Planned one step ahead (async scheduling): advance() at send time lets the next plan start
// where the step in flight ends, its decode row carrying the token that step will draw;
// commit() at return registers only the blocks that step filled.
TEST(Scheduler, PlanningAheadAdvancesAtSendAndCommitsAtReturn) {
  BlockManager blocks(16, 4);
  Scheduler sched(config(4, 64), blocks);
  Sequence a = make_seq(1, 7);
  ASSERT_TRUE(sched.add(a));
  const auto first = sched.schedule();
  EXPECT_EQ(rows(first), (std::vector<Row>{{&a, 0, 7, true}}));
  sched.advance(first);
  EXPECT_EQ(a.num_computed, 7);
  a.tokens.push_back(kPendingToken);
  a.pending = 1;
  const auto second = sched.schedule();
  EXPECT_EQ(rows(second), (std::vector<Row>{{&a, 7, 1, true}}));
  sched.advance(second);
  EXPECT_THROW(sched.advance(second), std::logic_error);  // advanced twice
  EXPECT_EQ(blocks.cached_prefix_tokens(a.tokens.data(), 8), 0) << "registered before its KV was written";
  // The first step's answer: its one full block, not the second, which the second step fills.
  a.tokens[7] = 9;
  a.pending = 0;
  sched.commit(first);
  EXPECT_EQ(blocks.cached_prefix_tokens(a.tokens.data(), 9), 4);
  sched.commit(second);
  EXPECT_EQ(blocks.cached_prefix_tokens(a.tokens.data(), 9), 8);
}

// A sequence parked (or preempted) while a step still computes its rows is readmitted only
// once that step returned, so that the step's blocks are committed from the table it wrote;
// it holds up the admissions behind it meanwhile.
TEST(Scheduler, ASequenceAStepStillComputesIsNotReadmitted) {
  BlockManager blocks(16, 4);
  Scheduler sched(config(4, 64), blocks);
  Sequence a = make_seq(1, 5), b = make_seq(2, 3);
  ASSERT_TRUE(sched.add(a));
  const auto first = sched.schedule();
  sched.advance(first);
  a.in_flight = 1;
  sched.park(a);
  sched.unpark(a);
  ASSERT_TRUE(sched.add(b));
  EXPECT_TRUE(sched.schedule().empty());
  a.in_flight = 0;  // the step returned
  EXPECT_EQ(rows(sched.schedule()), (std::vector<Row>{{&a, 0, 5, true}, {&b, 0, 3, true}}));
}

// A lost replica's sequences move to another replica's scheduler: out of the first with their
// tokens (blocks released, a parked one still parked), into the second ahead of its waiting
// sequences, in the order they were served, even past a full waiting queue.
TEST(Scheduler, HandedOffSequencesAreAdoptedAheadOfTheWaiting) {
  BlockManager from_blocks(64, 4), to_blocks(64, 4);
  Scheduler from(config(2, 64), from_blocks);
  Scheduler to(config(1, 64, /*max_waiting=*/1), to_blocks);
  Sequence a = make_seq(1, 5), b = make_seq(2, 6), c = make_seq(3, 3), d = make_seq(4, 2);
  Sequence x = make_seq(5, 4), y = make_seq(6, 4);
  for (Sequence* s : {&a, &b, &c, &d}) ASSERT_TRUE(from.add(*s));
  finish_step(from, from.schedule());
  from.park(d);
  from.preempt_all();
  ASSERT_EQ(from.waiting(), (std::deque<Sequence*>{&a, &b, &c}));
  std::vector<Sequence*> moved;
  for (Sequence* s : from.waiting()) moved.push_back(s);
  for (Sequence* s : moved) from.hand_off(*s);
  from.hand_off(d);
  EXPECT_EQ(from.num_waiting(), 0u);
  EXPECT_EQ(from_blocks.num_used(), 0);
  EXPECT_EQ(d.state, Sequence::State::parked);
  for (Sequence* s : moved) {
    EXPECT_EQ(s->state, Sequence::State::waiting);
    EXPECT_TRUE(s->blocks.table.empty());
  }
  EXPECT_EQ(a.num_tokens(), 6);  // its sampled token stays

  ASSERT_TRUE(to.add(x));
  ASSERT_TRUE(to.add(y));
  EXPECT_THROW(to.adopt({&d}), std::logic_error);  // parked: unparked where it lives now
  to.adopt(moved);
  ASSERT_EQ(to.waiting(), (std::deque<Sequence*>{&a, &b, &c, &x, &y}));
  to.unpark(d);
  ASSERT_EQ(to.waiting(), (std::deque<Sequence*>{&d, &a, &b, &c, &x, &y}));
  EXPECT_EQ(rows(to.schedule()), (std::vector<Row>{{&d, 0, 2, true}}));
}

// In priority mode the adopted keep their order among equals, behind none of theirs.
TEST(Scheduler, AdoptedSequencesKeepTheirOrderByPriority) {
  BlockManager from_blocks(64, 4), to_blocks(64, 4);
  Scheduler from(config(4, 64, 1024, /*priority=*/true), from_blocks);
  Scheduler to(config(4, 64, 1024, /*priority=*/true), to_blocks);
  Sequence a = make_seq(1, 5), b = make_seq(2, 6), x = make_seq(3, 3);
  a.priority = 1;
  b.priority = 1;
  x.priority = 0;
  ASSERT_TRUE(from.add(a));
  ASSERT_TRUE(from.add(b));
  ASSERT_TRUE(to.add(x));
  from.hand_off(a);
  from.hand_off(b);
  to.adopt({&a, &b});
  ASSERT_EQ(to.waiting(), (std::deque<Sequence*>{&x, &a, &b}));
}

}  // namespace
}  // namespace orzo
