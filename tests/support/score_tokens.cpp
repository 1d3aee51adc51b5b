// score_tokens MODEL TEXT_FILE [int8]: tokenizes the text with the model's own tokenizer, runs it
// through orzo's CPU forward pass in chunks (positions continuing, as chunked prefill does)
// and prints JSON: the ids, and for every position after the first the log-probability of
// the token that follows and the model's top-1 token there. `int8` runs the block-type
// matrices with cpu::MatmulOptions::int8_activations. tests/runtime/test_perplexity.py
// holds these to transformers on the same weights.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "text/tokenizer/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::string(argv[3]) == "int8")) {
    std::fprintf(stderr, "usage: score_tokens MODEL TEXT_FILE [int8]\n");
    return 2;
  }
  try {
    std::ifstream in(argv[2]);
    std::stringstream text;
    text << in.rdbuf();
    const orzo::Tokenizer tokenizer = orzo::Tokenizer::for_model(argv[1]);
    const std::vector<int32_t> ids = tokenizer.encode(text.str());
    auto model = orzo::Model::load(argv[1]);
    const int64_t vocab = model->config().vocab_size;
    constexpr int32_t kChunk = 256;
    orzo::CpuBackend::Options o;
    o.block_size = 16;
    o.kv_blocks = static_cast<int32_t>(ids.size() / 16 + 1);
    o.max_rows = kChunk;
    o.matmul.int8_activations = argc == 4;
    orzo::CpuBackend backend(model, o);
    std::vector<int32_t> table(static_cast<size_t>(o.kv_blocks));
    for (int32_t i = 0; i < o.kv_blocks; ++i) table[static_cast<size_t>(i)] = i;

    nlohmann::json out;
    out["ids"] = ids;
    std::vector<double> logprobs;
    std::vector<int32_t> top1;
    std::vector<float> hidden, logits;
    for (size_t start = 0; start + 1 < ids.size(); start += kChunk) {
      const auto count = static_cast<int32_t>(std::min<size_t>(kChunk, ids.size() - 1 - start));
      orzo::ForwardBatch b;
      b.block_tables.push_back(table);
      b.add_chunk(0, ids.data() + start, count, static_cast<int32_t>(start), false);
      for (int32_t r = 0; r < count; ++r) b.logit_rows.push_back(r);
      backend.forward(b, hidden, logits);
      for (int32_t r = 0; r < count; ++r) {
        const float* row = logits.data() + static_cast<size_t>(r) * static_cast<size_t>(vocab);
        const float max = *std::max_element(row, row + vocab);
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
        const int32_t next = ids[start + static_cast<size_t>(r) + 1];
        logprobs.push_back(static_cast<double>(row[next]) - max - std::log(sum));
        top1.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
      }
    }
    out["logprobs"] = logprobs;
    out["top1"] = top1;
    std::cout << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "score_tokens: %s\n", e.what());
    return 1;
  }
  return 0;
}
