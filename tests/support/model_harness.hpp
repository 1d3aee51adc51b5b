#pragma once
// Test-side driving of layer backends: gives each sequence its own KV blocks and runs
// prefill / greedy decode through one or more chained ranges, the way a batcher would.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/layer_backend.hpp"

namespace orzo::testing {

// A pipeline of ranges that together cover the model; hidden states flow front to back.
class Pipeline {
 public:
  Pipeline(std::vector<LayerBackend*> stages, int32_t blocks_per_seq)
      : stages_(std::move(stages)), blocks_per_seq_(blocks_per_seq) {}

  // KV blocks [seq * blocks_per_seq, (seq + 1) * blocks_per_seq) belong to sequence `seq`.
  std::vector<int32_t> table(int32_t seq) const {
    std::vector<int32_t> t(static_cast<size_t>(blocks_per_seq_));
    for (int32_t i = 0; i < blocks_per_seq_; ++i) t[static_cast<size_t>(i)] = seq * blocks_per_seq_ + i;
    return t;
  }

  std::vector<float> run(const ForwardBatch& b) {
    std::vector<float> hidden, logits;
    for (auto* s : stages_) s->forward(b, hidden, logits);
    return logits;
  }

  // Prefills `tokens` of sequence `seq` from position `start`, returning logits for every row.
  std::vector<float> prefill_all(int32_t seq, const std::vector<int32_t>& tokens, int32_t start = 0) {
    ForwardBatch b;
    b.block_tables.push_back(table(seq));
    b.add_chunk(0, tokens.data(), static_cast<int32_t>(tokens.size()), start, false);
    for (int32_t r = 0; r < b.rows(); ++r) b.logit_rows.push_back(r);
    return run(b);
  }

  // Greedy continuation of `prompt` (prefilled here) for `n` tokens.
  std::vector<int32_t> greedy(int32_t seq, const std::vector<int32_t>& prompt, int n, int64_t vocab) {
    auto logits = prefill_all(seq, prompt);
    std::vector<int32_t> out;
    int32_t pos = static_cast<int32_t>(prompt.size());
    int32_t next = argmax(logits.data() + (prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
    for (int i = 0; i < n; ++i) {
      out.push_back(next);
      if (i + 1 == n) break;
      ForwardBatch b;
      b.block_tables.push_back(table(seq));
      b.add_chunk(0, &next, 1, pos++, true);
      logits = run(b);
      next = argmax(logits.data(), vocab);
    }
    return out;
  }

  static int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

 private:
  std::vector<LayerBackend*> stages_;
  int32_t blocks_per_seq_;
};

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace orzo::testing
