// The runtime without actors: load a model, prefill a prompt of token ids, and sample a
// continuation one decode step at a time. This is what one worker does for one sequence.
//
//   continue_tokens MODEL [N] [TEMPERATURE] [SEED]
//   continue_tokens ../shared/models/stories260K/stories260K.gguf 40 0.8 7
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "runtime/sampler.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [N] [TEMPERATURE] [SEED]\n", argv[0]);
    return 2;
  }
  try {
    auto model = orzo::Model::load(argv[1]);
    const int n = argc > 2 ? std::atoi(argv[2]) : 32;
    orzo::SamplingParams params;
    params.temperature = argc > 3 ? std::strtof(argv[3], nullptr) : 0.0f;
    if (argc > 4) params.seed = std::strtoull(argv[4], nullptr, 10);
    orzo::Sampler sampler(params);

    const int64_t vocab = model->config().vocab_size;
    std::vector<int32_t> tokens = {model->config().bos_token_id.value_or(1)};
    const auto blocks = static_cast<int32_t>((tokens.size() + static_cast<size_t>(n)) / orzo::kDefaultBlockSize + 1);
    orzo::CpuBackend::Options options;
    options.kv_blocks = blocks;
    orzo::CpuBackend backend(model, options);

    std::vector<int32_t> table(static_cast<size_t>(blocks));
    for (int32_t i = 0; i < blocks; ++i) table[static_cast<size_t>(i)] = i;
    std::vector<float> hidden, logits;
    size_t fed = 0;  // tokens already in the KV cache
    for (int i = 0; i < n; ++i) {
      orzo::ForwardBatch step;
      step.block_tables = {table};
      step.add_chunk(0, tokens.data() + fed, static_cast<int32_t>(tokens.size() - fed), static_cast<int32_t>(fed), true);
      fed = tokens.size();
      backend.forward(step, hidden, logits);
      const auto next = sampler.sample(logits.data(), static_cast<int32_t>(vocab), tokens.data(), tokens.size());
      tokens.push_back(next.token);
      std::printf("%d ", next.token);
    }
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "continue_tokens: %s\n", e.what());
    return 1;
  }
  return 0;
}
