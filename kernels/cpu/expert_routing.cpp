#include "kernels/cpu/expert_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace orzo::cpu {

int64_t ExpertRouting::active_experts() const {
  int64_t n = 0;
  for (int64_t e = 0; e < experts; ++e) n += rows_of(e) > 0;
  return n;
}

void route_experts(const float* logits, int64_t rows, int64_t experts, int64_t top_k, bool renormalize,
                   ExpertRouting& out) {
  out.experts = experts;
  out.top_k = top_k;
  const auto k = static_cast<size_t>(top_k), n = static_cast<size_t>(experts);
  out.choice.resize(static_cast<size_t>(rows) * k);
  out.weight.resize(out.choice.size());
  // Scratch kept per thread: this runs in every MoE layer of every step.
  thread_local std::vector<float> prob;
  thread_local std::vector<int32_t> order, next;
  prob.resize(n);
  order.resize(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * experts;
    const float top = *std::max_element(z, z + experts);
    float sum = 0;
    for (size_t e = 0; e < n; ++e) sum += prob[e] = std::exp(z[e] - top);
    for (float& p : prob) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    auto better = [&](int32_t a, int32_t b) {
      const float pa = prob[static_cast<size_t>(a)], pb = prob[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), better);
    float kept = 0;
    for (size_t i = 0; i < k; ++i) kept += prob[static_cast<size_t>(order[i])];
    for (size_t i = 0; i < k; ++i) {
      const float p = prob[static_cast<size_t>(order[i])];
      out.choice[static_cast<size_t>(r) * k + i] = order[i];
      out.weight[static_cast<size_t>(r) * k + i] = renormalize ? p / kept : p;
    }
  }
  // Group by expert: a count, a prefix sum, then each choice in row order.
  out.begin.assign(n + 1, 0);
  for (int32_t e : out.choice) ++out.begin[static_cast<size_t>(e) + 1];
  std::partial_sum(out.begin.begin(), out.begin.end(), out.begin.begin());
  out.rows.resize(out.choice.size());
  out.row_weight.resize(out.choice.size());
  out.slot.resize(out.choice.size());
  next.assign(out.begin.begin(), out.begin.end() - 1);
  for (size_t i = 0; i < out.choice.size(); ++i) {
    const auto at = static_cast<size_t>(next[static_cast<size_t>(out.choice[i])]++);
    out.slot[i] = static_cast<int32_t>(at);
    out.rows[at] = static_cast<int32_t>(i / k);
    out.row_weight[at] = out.weight[i];
  }
}

}  // namespace orzo::cpu
