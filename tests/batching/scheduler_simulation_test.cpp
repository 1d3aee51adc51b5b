// A property test of the scheduler and the block manager together: random workloads run
// through a fake model whose "KV cache" is real (each computed row writes its token into
// its block slot, and sampling reads the whole prefix back through the block table), with a
// pool small enough to force preemption, shared prompt stems for prefix hits, random
// cancellations and random lengths. Every sequence must produce exactly what it produces
// when run alone with a huge pool, so any block handed to the wrong sequence, any cached
// block served for the wrong prefix, any position skipped or computed twice shows up as a
// wrong token. Some workloads also give the model sliding-window layers with tables of
// their own (core/kv_layout.hpp), whose given-back blocks must never be read again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "batching/block_manager.hpp"
#include "batching/scheduler.hpp"
#include "batching/sequence.hpp"

namespace orzo {
namespace {

constexpr int32_t kVocab = 97;

class FakeModel {
 public:
  // One global layer, and a sliding one per group after the first of `windows`. A block holds
  // one slot value per position whichever group's table holds it, as a real block holds the
  // planes of its group's layers.
  FakeModel(int32_t num_blocks, int32_t block_size, std::vector<int32_t> windows = {0})
      : block_size_(block_size),
        windows_(std::move(windows)),
        slots_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0) {}

  // Next token of each sampling chunk, in plan order. Like real KV, a slot's value depends
  // on the whole prefix: it is computed from the token and the previous position's value,
  // read back through the block table (in a sliding layer, only while that position is in
  // the window). All rows are written before any sample reads, so two chunks writing one
  // block would corrupt a read.
  std::vector<int32_t> run(const StepPlan& plan) {
    for (const ScheduledChunk& c : plan.chunks)
      for (int32_t p = c.first_pos; p < c.first_pos + c.count; ++p)
        for (int32_t g = 0; g < groups(); ++g) {
          const bool sees_previous = p > 0 && (window(g) == 0 || window(g) >= 2);
          slot(*c.seq, g, p) = next_hash(sees_previous ? slot(*c.seq, g, p - 1) : 0, c.seq->tokens[static_cast<size_t>(p)] + 1000 * g);
        }
    std::vector<int32_t> sampled;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      const int32_t last = c.first_pos + c.count - 1;
      uint64_t h = 0;
      for (int32_t g = 0; g < groups(); ++g)
        for (int32_t p = window(g) == 0 ? 0 : std::max(0, last - window(g) + 1); p <= last; ++p) h = fold(h, slot(*c.seq, g, p));
      sampled.push_back(token_of(h));
    }
    return sampled;
  }

  static uint64_t fold(uint64_t h, uint64_t value) { return (h ^ value) * 0x100000001b3ULL + 1; }
  static uint64_t next_hash(uint64_t h, int32_t token) { return fold(h, static_cast<uint64_t>(token) + 1); }
  static int32_t token_of(uint64_t h) { return static_cast<int32_t>((h >> 17) % kVocab); }

 private:
  int32_t groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t window(int32_t g) const { return windows_[static_cast<size_t>(g)]; }

  uint64_t& slot(const Sequence& seq, int32_t g, int32_t pos) {
    const auto& table = g == 0 ? seq.blocks.table : seq.blocks.windowed.at(static_cast<size_t>(g - 1));
    const auto block = static_cast<size_t>(pos / block_size_);
    EXPECT_LT(block, table.size()) << "seq " << seq.id << " position " << pos << " has no block";
    const int32_t id = block < table.size() ? table[block] : 0;
    EXPECT_NE(id, kNoBlock) << "seq " << seq.id << " group " << g << " reads position " << pos << " given back";
    return slots_[static_cast<size_t>(std::max(id, 0)) * static_cast<size_t>(block_size_) + static_cast<size_t>(pos % block_size_)];
  }

  int32_t block_size_;
  std::vector<int32_t> windows_;
  std::vector<uint64_t> slots_;
};

struct Request {
  std::vector<int32_t> prompt;
  int32_t max_new = 1;
  int32_t priority = 0;
};

struct Outcome {
  std::vector<int32_t> generated;
  bool cancelled = false;
};

struct Totals {
  uint64_t preemptions = 0, prefix_hits = 0, cancellations = 0, steps = 0;
};

// Two degenerate hashes: every block alike, and blocks alike whenever their first tokens
// are, at any depth of any chain (so a block can collide with another chain's ancestor).
uint64_t constant_hash(uint64_t, const int32_t*, int32_t) { return 1; }
uint64_t first_token_hash(uint64_t, const int32_t* tokens, int32_t) { return static_cast<uint64_t>(tokens[0]); }

// Checks what schedule() promises of a plan.
void check_plan(const StepPlan& plan, const Scheduler& sched, const SchedulerConfig& config, int32_t block_size,
                const std::vector<int32_t>& windows) {
  int32_t total = 0;
  std::vector<const Sequence*> seen;
  for (const ScheduledChunk& c : plan.chunks) {
    const Sequence& s = *c.seq;
    ASSERT_EQ(s.state, Sequence::State::running);
    ASSERT_EQ(c.first_pos, s.num_computed) << "seq " << s.id;
    ASSERT_GE(c.count, 1);
    ASSERT_LE(c.first_pos + c.count, s.num_tokens());
    ASSERT_EQ(c.sample, c.first_pos + c.count == s.num_tokens());
    ASSERT_GE(static_cast<int64_t>(s.blocks.table.size()) * block_size, c.first_pos + c.count);
    for (size_t g = 1; g < windows.size(); ++g) {
      const auto& table = s.blocks.windowed.at(g - 1);
      ASSERT_EQ(table.size(), s.blocks.table.size());
      for (size_t j = static_cast<size_t>(first_block_read(windows[g], c.first_pos, block_size)); j < table.size(); ++j)
        ASSERT_NE(table[j], kNoBlock) << "seq " << s.id << " needs block " << j << " of group " << g;
    }
    ASSERT_EQ(std::count(seen.begin(), seen.end(), &s), 0) << "seq " << s.id << " planned twice";
    seen.push_back(&s);
    total += c.count;
  }
  ASSERT_EQ(total, plan.num_tokens);
  ASSERT_LE(total, config.max_num_batched_tokens);
  ASSERT_LE(sched.num_running(), static_cast<size_t>(config.max_num_seqs));
  for (const Sequence* s : plan.preempted) {
    ASSERT_EQ(s->state, Sequence::State::waiting);
    ASSERT_TRUE(s->blocks.table.empty());
    ASSERT_EQ(std::count(seen.begin(), seen.end(), s), 0);
  }
}

// Runs `requests` to completion (or cancellation) and returns what each generated.
// cancel_rate: chance per step that one live sequence is removed, half the time between
// schedule() and complete().
std::vector<Outcome> serve(const std::vector<Request>& requests, BlockManager& bm, const SchedulerConfig& config,
                           double cancel_rate, std::mt19937_64& rng, Totals& totals) {
  Scheduler sched(config, bm);
  FakeModel model(bm.num_blocks(), bm.block_size(), bm.windows());
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Outcome> outcomes(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto s = std::make_unique<Sequence>();
    s->id = i;
    s->tokens = requests[i].prompt;
    s->prompt_len = static_cast<int32_t>(requests[i].prompt.size());
    s->priority = requests[i].priority;
    EXPECT_TRUE(sched.fits(*s));
    seqs.push_back(std::move(s));
  }
  std::deque<Sequence*> pending;
  for (auto& s : seqs) pending.push_back(s.get());
  std::vector<Sequence*> live;
  auto finish = [&](Sequence& s, bool cancelled) {
    sched.remove(s);
    const auto id = static_cast<size_t>(s.id);
    outcomes[id].generated.assign(s.tokens.begin() + s.prompt_len, s.tokens.end());
    outcomes[id].cancelled = cancelled;
    totals.preemptions += static_cast<uint64_t>(s.preemptions);
    live.erase(std::find(live.begin(), live.end(), &s));
  };
  std::uniform_real_distribution<double> chance(0, 1);
  for (int step = 0; !pending.empty() || !live.empty(); ++step) {
    if (step > 20000) {
      ADD_FAILURE() << "no end after 20000 steps";
      break;
    }
    // arrivals: a few at a time, refused ones retried later
    for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0 && !pending.empty(); --n) {
      if (!sched.add(*pending.front())) break;
      live.push_back(pending.front());
      pending.pop_front();
    }
    if (!live.empty() && chance(rng) < cancel_rate / 2) {
      finish(*live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng)], true);
      ++totals.cancellations;
    }
    StepPlan plan = sched.schedule();
    check_plan(plan, sched, config, bm.block_size(), bm.windows());
    if (::testing::Test::HasFatalFailure()) return outcomes;
    if (plan.empty() && plan.preempted.empty() && !live.empty()) {
      ADD_FAILURE() << "stalled at step " << step << " with " << sched.num_running() << " running, " << sched.num_waiting()
                    << " waiting";
      break;
    }
    bm.check(sched.live_blocks());
    const std::vector<int32_t> sampled = model.run(plan);
    if (!plan.chunks.empty() && chance(rng) < cancel_rate / 2) {
      const ScheduledChunk& c = plan.chunks[std::uniform_int_distribution<size_t>(0, plan.chunks.size() - 1)(rng)];
      finish(*c.seq, true);
      ++totals.cancellations;
    }
    sched.complete(plan);
    size_t next = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      const int32_t token = sampled[next++];
      Sequence& s = *c.seq;
      if (s.state != Sequence::State::running) continue;
      s.tokens.push_back(token);
      if (s.num_tokens() - s.prompt_len == requests[static_cast<size_t>(s.id)].max_new) finish(s, false);
    }
    bm.check(sched.live_blocks());
    ++totals.steps;
  }
  totals.prefix_hits += bm.stats().prefix_hit_tokens;
  EXPECT_EQ(bm.num_used(), 0);
  bm.check({});
  return outcomes;
}

TEST(SchedulerSimulation, EveryOutputMatchesTheSequenceRunAlone) {
  Totals totals;
  int collided_workloads = 0, windowed_workloads = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto uniform = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
    const int32_t block_size = uniform(1, 5);
    int32_t num_blocks = uniform(6, 20);
    SchedulerConfig config;
    config.max_num_seqs = uniform(1, 8);
    config.max_num_batched_tokens = uniform(1, 40);
    config.max_waiting = uniform(1, 6);
    config.priority = uniform(0, 1) == 1;
    // A third of the workloads have sliding layers, some in two groups, windows from one
    // position to a few blocks; their pools grow until a sequence can be long enough to
    // leave its windows behind.
    std::vector<int32_t> windows = {0};
    if (seed % 3 == 1) {
      for (int32_t g = uniform(1, 2); g > 0; --g) windows.push_back(uniform(1, 10));
      ++windowed_workloads;
    }
    while (windows.size() > 1 &&
           BlockManager(num_blocks, block_size, true, windows).capacity_tokens(config.max_num_batched_tokens) < 24)
      num_blocks += 4;
    const auto capacity = static_cast<int32_t>(
        BlockManager(num_blocks, block_size, true, windows).capacity_tokens(config.max_num_batched_tokens));
    // A few stems shared by many prompts, so that blocks are cached and reused.
    std::vector<std::vector<int32_t>> stems(3);
    for (auto& stem : stems) {
      stem.resize(static_cast<size_t>(uniform(0, 12)));
      for (int32_t& t : stem) t = uniform(0, kVocab - 1);
    }
    std::vector<Request> requests(static_cast<size_t>(uniform(5, 30)));
    for (Request& r : requests) {
      r.prompt = stems[static_cast<size_t>(uniform(0, 2))];
      for (int32_t n = uniform(r.prompt.empty() ? 1 : 0, 8); n > 0; --n) r.prompt.push_back(uniform(0, kVocab - 1));
      r.prompt.resize(std::min<size_t>(r.prompt.size(), static_cast<size_t>(capacity - 1)));
      r.max_new = uniform(1, std::min<int32_t>(12, capacity - static_cast<int32_t>(r.prompt.size())));
      r.priority = uniform(0, 3);
    }
    const bool collide = seed % 4 == 0;
    collided_workloads += collide;

    BlockManager bm(num_blocks, block_size, seed % 7 != 0, windows);
    if (collide) bm.set_hash_function(seed % 8 == 0 ? &constant_hash : &first_token_hash);
    const std::vector<Outcome> outcomes = serve(requests, bm, config, 0.05, rng, totals);
    if (HasFailure()) return;

    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      BlockManager alone_bm(1024, block_size, true, windows);
      Totals ignored;
      const std::vector<Outcome> alone = serve({requests[i]}, alone_bm, SchedulerConfig{}, 0, rng, ignored);
      ASSERT_EQ(alone[0].generated.size(), static_cast<size_t>(requests[i].max_new));
      const std::vector<int32_t>& got = outcomes[i].generated;
      if (outcomes[i].cancelled) {
        ASSERT_LE(got.size(), alone[0].generated.size());
        ASSERT_TRUE(std::equal(got.begin(), got.end(), alone[0].generated.begin()));
      } else {
        ASSERT_EQ(got, alone[0].generated);
      }
    }
  }
  // The workloads must have exercised what they are meant to test.
  EXPECT_GT(totals.preemptions, 100u);
  EXPECT_GT(totals.prefix_hits, 1000u);
  EXPECT_GT(totals.cancellations, 50u);
  EXPECT_GT(collided_workloads, 0);
  EXPECT_GT(windowed_workloads, 0);
  std::printf("%llu steps, %llu preemptions, %llu prefix-hit tokens, %llu cancellations\n",
              static_cast<unsigned long long>(totals.steps), static_cast<unsigned long long>(totals.preemptions),
              static_cast<unsigned long long>(totals.prefix_hits), static_cast<unsigned long long>(totals.cancellations));
}

// The model itself, unbatched: the alone runs above must agree with it, or the comparison
// would prove nothing.
TEST(SchedulerSimulation, AloneRunMatchesTheModelDirectly) {
  for (const std::vector<int32_t>& windows : {std::vector<int32_t>{0}, std::vector<int32_t>{0, 5}}) {
    std::mt19937_64 rng(5);
    Request r;
    r.prompt = {3, 1, 4, 1, 5, 9, 2, 6};
    r.max_new = 10;
    BlockManager bm(64, 3, true, windows);
    Totals totals;
    const std::vector<Outcome> out = serve({r}, bm, SchedulerConfig{}, 0, rng, totals);
    std::vector<int32_t> tokens = r.prompt, expected;
    for (int i = 0; i < r.max_new; ++i) {
      std::vector<uint64_t> kv(tokens.size()), window_kv(tokens.size());
      for (size_t p = 0; p < tokens.size(); ++p) {
        kv[p] = FakeModel::next_hash(p == 0 ? 0 : kv[p - 1], tokens[p]);
        window_kv[p] = FakeModel::next_hash(p == 0 ? 0 : window_kv[p - 1], tokens[p] + 1000);
      }
      uint64_t h = 0;
      for (uint64_t v : kv) h = FakeModel::fold(h, v);
      if (windows.size() > 1)
        for (size_t p = tokens.size() - 5; p < tokens.size(); ++p) h = FakeModel::fold(h, window_kv[p]);
      tokens.push_back(FakeModel::token_of(h));
      expected.push_back(tokens.back());
    }
    EXPECT_EQ(out[0].generated, expected) << windows.size() << " groups";
  }
}

}  // namespace
}  // namespace orzo
