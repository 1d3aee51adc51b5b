// The scheduler's own cost per step, which the batcher pays between two forward passes:
// schedule() + complete() (and the batcher's append of each sampled token) with every
// running sequence decoding. Sequences grow by one token a step, filling and registering
// a block every block_size steps as in a real run. Every kRound steps the sequences are
// restarted outside the timing, so that the pool never runs out.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "batching/block_manager.hpp"
#include "batching/scheduler.hpp"
#include "batching/sequence.hpp"

namespace {

constexpr int32_t kPrompt = 64, kRound = 1024, kBlockSize = 16;

// Admits and prefills every sequence, so that the next step is all decode rows.
void start(orzo::Scheduler& sched, std::vector<orzo::Sequence>& seqs) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    orzo::Sequence& s = seqs[i];
    s = orzo::Sequence{};
    s.id = i;
    s.tokens.reserve(kPrompt + kRound + 1);
    s.tokens.resize(kPrompt);
    std::iota(s.tokens.begin(), s.tokens.end(), static_cast<int32_t>(i) * kPrompt);
    s.prompt_len = kPrompt;
    sched.add(s);
  }
  while (sched.num_waiting() > 0 || seqs.front().num_computed < kPrompt) {
    const orzo::StepPlan plan = sched.schedule();
    sched.complete(plan);
    for (const orzo::ScheduledChunk& c : plan.chunks)
      if (c.sample) c.seq->tokens.push_back(1);
  }
}

void BM_DecodeStep(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const bool prefix_caching = state.range(1) != 0;
  orzo::BlockManager blocks(n * ((kPrompt + kRound) / kBlockSize + 2), kBlockSize, prefix_caching);
  orzo::SchedulerConfig config;
  config.max_num_seqs = n;
  config.max_num_batched_tokens = n * kPrompt;
  orzo::Scheduler sched(config, blocks);
  std::vector<orzo::Sequence> seqs(static_cast<size_t>(n));
  start(sched, seqs);
  int32_t steps = 0;
  for (auto _ : state) {
    const orzo::StepPlan plan = sched.schedule();
    for (const orzo::ScheduledChunk& c : plan.chunks) c.seq->tokens.push_back(2);
    sched.complete(plan);
    benchmark::DoNotOptimize(plan.chunks.data());
    if (++steps == kRound) {
      state.PauseTiming();
      for (orzo::Sequence& s : seqs) sched.remove(s);
      start(sched, seqs);
      steps = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_DecodeStep)->ArgNames({"seqs", "prefix_cache"})->Args({64, 1})->Args({256, 1})->Args({64, 0})->Args({256, 0});

}  // namespace

BENCHMARK_MAIN();
