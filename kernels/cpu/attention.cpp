#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace orzo::cpu {

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void paged_attention(const float* q, const ForwardBatch& batch, KvCache& cache, int64_t layer,
                     const AttentionShape& shape, float* out, ThreadPool& pool) {
  const int64_t hd = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  const int64_t q_stride = shape.num_heads * hd;
  const int32_t bs = cache.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One work item is one (row, kv head): the query heads of a group share its K/V reads.
  const int64_t items = batch.rows() * shape.num_kv_heads;
  pool.parallel_for(items, [&](int64_t begin, int64_t end, int) {
    thread_local std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / shape.num_kv_heads, kvh = item % shape.num_kv_heads;
      const int32_t pos = batch.positions[static_cast<size_t>(row)];
      const auto& table = batch.block_tables[static_cast<size_t>(batch.seq_index[static_cast<size_t>(row)])];
      const int32_t first = shape.sliding_window
                                ? std::max<int32_t>(0, pos - static_cast<int32_t>(*shape.sliding_window) + 1)
                                : 0;
      const int64_t n = pos - first + 1;
      scores.resize(static_cast<size_t>(n * group));
      for (int64_t g = 0; g < group; ++g) {
        const float* qh = q + row * q_stride + (kvh * group + g) * hd;
        float* s = scores.data() + g * n;
        float max_s = -INFINITY;
        for (int32_t p = first; p <= pos; ++p) {
          const float* k = cache.key(layer, table[static_cast<size_t>(p / bs)], p % bs) + kvh * hd;
          s[p - first] = dot(qh, k, hd) * scale;
          max_s = std::max(max_s, s[p - first]);
        }
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          s[j] = std::exp(s[j] - max_s);
          sum += s[j];
        }
        const float inv = 1.0f / sum;
        float* o = out + row * q_stride + (kvh * group + g) * hd;
        std::fill(o, o + hd, 0.0f);
        for (int32_t p = first; p <= pos; ++p) {
          const float* v = cache.value(layer, table[static_cast<size_t>(p / bs)], p % bs) + kvh * hd;
          const float w = s[p - first] * inv;
          for (int64_t i = 0; i < hd; ++i) o[i] += w * v[i];
        }
      }
    }
  });
}

}  // namespace orzo::cpu
