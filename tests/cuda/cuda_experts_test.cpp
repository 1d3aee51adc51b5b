// The Mixture-of-Experts kernels against their CPU twins: the router's softmax and top k and
// the grouping by expert (cpu::route_experts), with ties, top_k = experts, more experts than a
// warp has lanes, renormalized or not; the gather into grouped order and the weighted sum back
// (CpuBackend::expert_block's loops), with and without Qwen2-MoE's gated shared expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/expert_routing.hpp"
#include "kernels/cuda/expert_routing.hpp"
#include "kernels/cuda/expert_rows.hpp"
#include "tests/support/cuda_harness.hpp"

namespace orzo::cuda {
namespace {

using test::DeviceBuffer;
using test::to_elem;

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct RoutingCase {
  int32_t rows, experts, top_k;
  bool renormalize;
};

// Logits [rows, stride] with the columns past `experts` NaN (a kernel that reads them fails),
// and ties planted: row 0 all equal, row 1 three values repeated, row 2 its best two equal.
std::vector<float> router_logits(const RoutingCase& c, int32_t stride, std::mt19937& rng) {
  std::vector<float> z = uniform(size_t(c.rows) * stride, -4, 4, rng);
  for (int32_t r = 0; r < c.rows; ++r)
    for (int32_t e = 0; e < stride; ++e) {
      float& v = z[size_t(r) * stride + e];
      if (e >= c.experts) v = std::nanf("");
      else if (r == 0) v = 0.5f;
      else if (r == 1) v = static_cast<float>(e % 3);
      else if (r == 2 && e == c.experts - 1) v = 9.0f;
      else if (r == 2 && e == c.experts / 2) v = 9.0f;
    }
  return z;
}

TEST(CudaKernels, ExpertRoutingMatchesCpuRouteExpertsIncludingTies) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(11);
  const RoutingCase cases[] = {
      {7, 8, 2, true},    {7, 8, 2, false},   // Mixtral's shape
      {33, 60, 4, false},                      // Qwen2-MoE's: more experts than lanes
      {96, 128, 8, true},                      // Qwen3-MoE's
      {5, 5, 5, true},    {5, 5, 5, false},   // every expert chosen
      {3, 1, 1, true},    {4, 3, 1, false},
  };
  float max_weight_diff = 0;
  for (const RoutingCase& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + " rows, " + std::to_string(c.experts) + " experts, top " +
                 std::to_string(c.top_k) + (c.renormalize ? ", renormalized" : ""));
    const int32_t stride = c.experts + 1;  // a column past the experts, as the shared gate's
    const std::vector<float> z = router_logits(c, stride, rng);
    std::vector<float> packed(size_t(c.rows) * c.experts);  // the twin reads [rows, experts]
    for (int32_t r = 0; r < c.rows; ++r)
      std::copy_n(z.data() + size_t(r) * stride, c.experts, packed.data() + size_t(r) * c.experts);
    cpu::ExpertRouting want;
    cpu::route_experts(packed.data(), c.rows, c.experts, c.top_k, c.renormalize, want);

    const size_t choices = size_t(c.rows) * c.top_k;
    DeviceBuffer<float> d_z(z);
    DeviceBuffer<int32_t> choice(choices), begin(size_t(c.experts) + 1), grouped_row(choices), row_slot(choices);
    DeviceBuffer<float> weight(choices), row_weight(choices);
    route_expert_rows(d_z.get(), stride, c.rows, c.experts, c.top_k, c.renormalize, choice.get(), weight.get(), nullptr);
    group_by_expert(choice.get(), weight.get(), c.rows, c.top_k, c.experts, begin.get(), grouped_row.get(),
                    row_slot.get(), row_weight.get(), nullptr);

    // Row by row: the same experts in the same order (ties to the lower id), the same weights
    // but for the order of the softmax's sum.
    EXPECT_EQ(choice.download(), want.choice);
    const std::vector<float> got_weight = weight.download();
    for (size_t i = 0; i < choices; ++i) {
      max_weight_diff = std::max(max_weight_diff, std::fabs(got_weight[i] - want.weight[i]));
      ASSERT_NEAR(got_weight[i], want.weight[i], 1e-6f * want.weight[i] + 1e-7f) << "choice " << i;
    }
    // By expert: the same groups, rows in row order.
    EXPECT_EQ(begin.download(), want.begin);
    EXPECT_EQ(grouped_row.download(), want.rows);
    // By row in expert order: where each of its experts' outputs is, and the weight.
    std::map<std::pair<int32_t, int32_t>, int32_t> slot_of;  // (row, expert) -> grouped index
    for (int32_t e = 0; e < c.experts; ++e)
      for (int32_t at = want.begin[size_t(e)]; at < want.begin[size_t(e) + 1]; ++at) slot_of[{want.rows[size_t(at)], e}] = at;
    const std::vector<int32_t> got_slot = row_slot.download();
    const std::vector<float> got_row_weight = row_weight.download();
    for (int32_t r = 0; r < c.rows; ++r) {
      std::vector<int32_t> order(size_t(c.top_k));
      std::iota(order.begin(), order.end(), 0);
      const int32_t* mine = want.choice.data() + size_t(r) * c.top_k;
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return mine[a] < mine[b]; });
      for (int32_t j = 0; j < c.top_k; ++j) {
        const size_t i = size_t(r) * c.top_k + size_t(j);
        EXPECT_EQ(got_slot[i], (slot_of[{r, mine[order[size_t(j)]]}])) << "row " << r << " choice " << j;
        EXPECT_EQ(got_row_weight[i], got_weight[size_t(r) * c.top_k + size_t(order[size_t(j)])]) << "row " << r;
      }
    }
  }
  std::printf("expert routing: max weight difference %.3g\n", static_cast<double>(max_weight_diff));
}

TEST(CudaKernels, GatherRowsCopiesEachIndexedRow) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(12);
  const int32_t sources = 6, width = 333;
  const std::vector<int32_t> index = {5, 0, 0, 3, 5, 1, 2, 4, 5};
  for (Elem e : {Elem::bf16, Elem::f16}) {
    SCOPED_TRACE(elem_name(e));
    const std::vector<uint16_t> src = to_elem(e, uniform(size_t(sources) * width, -3, 3, rng));
    DeviceBuffer<uint16_t> d_src(src), dst(index.size() * size_t(width));
    DeviceBuffer<int32_t> d_index(index);
    gather_rows(e, d_src.get(), d_index.get(), static_cast<int32_t>(index.size()), width, dst.get(), nullptr);
    const std::vector<uint16_t> got = dst.download();
    for (size_t i = 0; i < index.size(); ++i)
      for (int32_t c = 0; c < width; ++c)
        ASSERT_EQ(got[i * width + size_t(c)], src[size_t(index[i]) * width + size_t(c)]) << "row " << i << " col " << c;
  }
}

// The sum as CpuBackend::expert_block forms it: the shared expert times its sigmoid gate (or
// zero), then each expert's output times its weight, in expert order; added to the residual.
TEST(CudaKernels, CombineExpertsAddsWeightedOutputsInExpertOrder) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(13);
  const int32_t rows = 5, top_k = 3, hidden = 300, gate_stride = 9;
  const size_t choices = size_t(rows) * top_k;
  const std::vector<float> y = uniform(choices * hidden, -2, 2, rng), shared = uniform(size_t(rows) * hidden, -2, 2, rng),
                           gate = uniform(size_t(rows) * gate_stride, -6, 6, rng), x = uniform(size_t(rows) * hidden, -4, 4, rng),
                           row_weight = uniform(choices, 0, 1, rng);
  std::vector<int32_t> row_slot(choices);
  std::iota(row_slot.begin(), row_slot.end(), 0);
  std::shuffle(row_slot.begin(), row_slot.end(), rng);
  DeviceBuffer<float> d_y(y), d_shared(shared), d_gate(gate), d_weight(row_weight);
  DeviceBuffer<int32_t> d_slot(row_slot);
  for (bool with_shared : {false, true})
    for (bool accumulate : {true, false}) {
      SCOPED_TRACE(std::string(with_shared ? "shared expert" : "no shared expert") + (accumulate ? ", into x" : ""));
      DeviceBuffer<float> out(x);
      ExpertCombineArgs a;
      a.expert_out = d_y.get();
      a.row_slot = d_slot.get();
      a.row_weight = d_weight.get();
      a.rows = rows;
      a.top_k = top_k;
      a.hidden = hidden;
      if (with_shared) {
        a.shared = d_shared.get();
        a.shared_gate = d_gate.get() + 4;
        a.gate_stride = gate_stride;
      }
      a.out = out.get();
      a.accumulate = accumulate;
      combine_experts(a, nullptr);
      const std::vector<float> got = out.download();
      for (int32_t r = 0; r < rows; ++r) {
        const float scale = 1.0f / (1.0f + std::exp(-gate[size_t(r) * gate_stride + 4]));
        for (int32_t c = 0; c < hidden; ++c) {
          float sum = with_shared ? shared[size_t(r) * hidden + size_t(c)] * scale : 0.0f;
          for (int32_t j = 0; j < top_k; ++j) {
            const size_t i = size_t(r) * top_k + size_t(j);
            sum += row_weight[i] * y[size_t(row_slot[i]) * hidden + size_t(c)];
          }
          const size_t at = size_t(r) * hidden + size_t(c);
          const float want = accumulate ? x[at] + sum : sum;
          ASSERT_NEAR(got[at], want, 1e-5f * (1 + std::fabs(want))) << "row " << r << " col " << c;
        }
      }
    }
}

TEST(CudaKernels, ExpertKernelsRefuseBadShapesBeforeAnyLaunch) {
  ORZO_REQUIRE_GPU();
  EXPECT_THROW(route_expert_rows(nullptr, 8, 1, 8, 9, true, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(route_expert_rows(nullptr, 8, 1, 8, 0, true, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(route_expert_rows(nullptr, 7, 1, 8, 2, true, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(group_by_expert(nullptr, nullptr, 1, 3, 2, nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gather_rows(Elem::bf16, nullptr, nullptr, 1, 0, nullptr, nullptr), std::invalid_argument);
  ExpertCombineArgs a;
  a.rows = 1;
  a.top_k = 2;
  a.hidden = 4;
  a.shared = reinterpret_cast<const float*>(&a);  // a shared expert without its gate
  EXPECT_THROW(combine_experts(a, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace orzo::cuda
