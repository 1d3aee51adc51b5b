// sampling_problem, the one rule for what the sampler can run (the Sampler's own refusals are
// tested with it in tests/runtime/sampler_test.cpp): it names the field at fault.

#include "core/sampling_params.hpp"

#include <gtest/gtest.h>

#include <string>

namespace orzo {
namespace {

TEST(SamplingProblem, NamesTheFieldAndPassesTheDefaults) {
  EXPECT_FALSE(sampling_problem(SamplingParams{}));
  SamplingParams p;
  p.penalty_window = -1;
  const auto problem = sampling_problem(p);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->field, "penalty_window");
  EXPECT_NE(problem->message.find("penalty_window must be >= 0, got -1"), std::string::npos) << problem->message;
}

}  // namespace
}  // namespace orzo
