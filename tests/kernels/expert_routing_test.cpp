// The router's decision: softmax over every expert, the top k (ties to the lower id), the
// chosen probabilities renormalized or not, and the same choices grouped by expert.
#include "kernels/cpu/expert_routing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace orzo::cpu {
namespace {

TEST(ExpertRouting, TopKOfTheSoftmaxRenormalizedOrNot) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  double sum = 0;
  for (float z : logits) sum += std::exp(z);
  ExpertRouting r;
  route_experts(logits.data(), 1, 4, 2, false, r);
  EXPECT_EQ(r.choice, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(r.weight[0], std::exp(3.0) / sum, 1e-6);
  EXPECT_NEAR(r.weight[1], std::exp(2.0) / sum, 1e-6);
  route_experts(logits.data(), 1, 4, 2, true, r);
  EXPECT_NEAR(r.weight[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(r.weight[0] + r.weight[1], 1.0f, 1e-6);
}

TEST(ExpertRouting, TiesGoToTheLowerIdAndEveryExpertCanBeChosen) {
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f};
  ExpertRouting r;
  route_experts(logits.data(), 1, 3, 2, true, r);
  EXPECT_EQ(r.choice, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  route_experts(logits.data(), 1, 3, 3, false, r);
  EXPECT_EQ(r.choice, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(r.active_experts(), 3);
}

// Every (row, expert) choice appears once in its expert's group, in row order, at the slot
// the row's choice points to, with its weight.
TEST(ExpertRouting, GroupsEachChoiceUnderItsExpert) {
  const int64_t rows = 5, experts = 6, k = 2;
  std::vector<float> logits(static_cast<size_t>(rows * experts));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 1.7f) * 3.0f;
  ExpertRouting r;
  route_experts(logits.data(), rows, experts, k, true, r);
  ASSERT_EQ(r.begin.size(), static_cast<size_t>(experts + 1));
  EXPECT_EQ(r.begin.back(), rows * k);
  int64_t active = 0;
  for (int64_t e = 0; e < experts; ++e) {
    active += r.rows_of(e) > 0;
    for (int32_t i = r.begin[static_cast<size_t>(e)] + 1; i < r.begin[static_cast<size_t>(e) + 1]; ++i)
      EXPECT_LT(r.rows[static_cast<size_t>(i) - 1], r.rows[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(r.active_experts(), active);
  for (int64_t c = 0; c < rows * k; ++c) {
    const auto slot = static_cast<size_t>(r.slot[static_cast<size_t>(c)]);
    EXPECT_EQ(r.rows[slot], c / k);
    EXPECT_EQ(r.row_weight[slot], r.weight[static_cast<size_t>(c)]);
    const int32_t e = r.choice[static_cast<size_t>(c)];
    EXPECT_GE(static_cast<int32_t>(slot), r.begin[static_cast<size_t>(e)]);
    EXPECT_LT(static_cast<int32_t>(slot), r.begin[static_cast<size_t>(e) + 1]);
  }
}

}  // namespace
}  // namespace orzo::cpu
