#pragma once
// The bare forward pass of `orzo bench`: the batch's sequences on one CPU backend, no actors;
// the figure the actor path is measured against.

#include <memory>
#include <vector>

#include "cli/bench_options.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "runtime/sampler.hpp"

namespace orzo::cli {

// The sequences, each with blocks of its own and a random prompt, the next token drawn
// greedily through the real sampler, so that decode timings include its cost. A bench may run
// prefill and decode again: each run overwrites the same KV.
class BareBench {
 public:
  // Compute threads: --threads, or one per core.
  BareBench(std::shared_ptr<const Model> model, const BenchOptions& o);

  int threads() const { return threads_; }

  // The first pass faults in the mapped weights; timing starts warm, as in llama-bench.
  void warm_up();
  // The prompts of all sequences, packed into chunks of at most `chunk` rows; returns seconds.
  double prefill();
  // `gen` steps of one row per sequence; returns seconds.
  double decode();

  const CpuBackend::ExpertUse& expert_use() const { return backend_.expert_use(); }

 private:
  int32_t greedy_token(size_t row);

  const BenchOptions& o_;
  int32_t vocab_;
  int threads_;
  int32_t blocks_per_seq_;
  CpuBackend backend_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> prompt_tokens_;
  std::vector<float> hidden_, logits_;
  std::vector<int32_t> next_;
  Sampler sampler_;
};

}  // namespace orzo::cli
