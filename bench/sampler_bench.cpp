// What one draw costs the sampler at the vocabularies of real models (SmolLM2 49,152, Llama 3
// 128,256, Qwen 151,936), on every ISA level this CPU runs: temperature 1 with no top-k, as
// OpenAI's API samples by default, takes the whole-vocabulary path (exponentials, a bucket
// per token, the walk); top-k 40 takes the heap. The logits are Gaussian (sd 3), about as
// peaked as a small model's; each iteration draws from a fresh copy, as a step does.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.hpp"
#include "runtime/sampler.hpp"

namespace {

using orzo::Sampler;
using orzo::SamplingParams;

void draw(benchmark::State& state, orzo::cpu::Isa isa, int32_t vocab, int32_t top_k) {
  orzo::cpu::use_isa(isa);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab)), row(logits.size());
  for (float& x : logits) x = normal(rng);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = top_k;
  p.seed = 7;
  Sampler sampler(p);
  for (auto _ : state) {
    state.PauseTiming();
    row = logits;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sampler.sample(row.data(), vocab, nullptr, 0).token);
  }
}

const int kRegistered = [] {
  for (orzo::cpu::Isa isa : orzo::cpu::runnable_isas())
    for (int32_t vocab : {49152, 128256, 151936})
      for (int32_t top_k : {0, 40}) {
        const std::string name = std::string("draw/") + orzo::cpu::isa_name(isa) + "/vocab" + std::to_string(vocab) +
                                 (top_k ? "/top_k" + std::to_string(top_k) : "/all");
        benchmark::RegisterBenchmark(name.c_str(), draw, isa, vocab, top_k)->Unit(benchmark::kMicrosecond);
      }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
