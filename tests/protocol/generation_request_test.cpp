// check_request, the one owner of what a request may ask: each rule is refused naming the
// OpenAI parameter at fault (and context_length_exceeded where OpenAI says so), the first
// broken rule wins, and a request at every edge passes.

#include "protocol/generation_request.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

namespace orzo {
namespace {

const RequestBounds kBounds{32, 100};  // 32 tokens of context, ids 0..99

GenerationRequest fine() {
  GenerationRequest r;
  r.id = "r";
  r.prompt = {1, 2, 3};
  r.limits.max_tokens = 4;
  return r;
}

struct Case {
  const char* what;
  std::function<void(GenerationRequest&)> change;
  std::string param;
  std::string code;
  std::string in_message;
};

TEST(CheckRequest, EachRuleNamesItsParameter) {
  const Case cases[] = {
      {"empty prompt", [](GenerationRequest& r) { r.prompt.clear(); }, "prompt", "", "the prompt is empty"},
      {"negative id", [](GenerationRequest& r) { r.prompt[1] = -1; }, "prompt", "",
       "token id -1 is outside the vocabulary"},
      {"id past the vocabulary", [](GenerationRequest& r) { r.prompt[2] = 100; }, "prompt", "",
       "token id 100 is outside the vocabulary (size 100)"},
      {"prompt filling the context", [](GenerationRequest& r) { r.prompt.assign(32, 1); }, "prompt",
       "context_length_exceeded", "maximum context length is 32 tokens, and the prompt has 32"},
      {"no max_tokens", [](GenerationRequest& r) { r.limits.max_tokens = 0; }, "max_tokens", "", "at least 1"},
      {"negative max_tokens while scoring the prompt",
       [](GenerationRequest& r) {
         r.sampling.prompt_logprobs = 0;
         r.limits.max_tokens = -1;
       },
       "max_tokens", "", "at least 0"},
      {"prompt_logprobs past the limit",
       [](GenerationRequest& r) { r.sampling.prompt_logprobs = kMaxTopLogprobs + 1; }, "prompt_logprobs", "",
       "prompt_logprobs"},
      {"prompt_logprobs below -1", [](GenerationRequest& r) { r.sampling.prompt_logprobs = -2; }, "prompt_logprobs",
       "", "or -1 for none"},
      {"negative min_tokens", [](GenerationRequest& r) { r.limits.min_tokens = -1; }, "min_tokens", "", "at least 0"},
      {"min_tokens above max_tokens", [](GenerationRequest& r) { r.limits.min_tokens = 5; }, "min_tokens", "",
       "min_tokens (5) must not exceed max_tokens (4)"},
      {"prompt + max_tokens past the context", [](GenerationRequest& r) { r.limits.max_tokens = 30; }, "max_tokens",
       "context_length_exceeded", "prompt (3 tokens) + max_tokens (30) exceeds the context length 32"},
      {"sampling the sampler cannot run", [](GenerationRequest& r) { r.sampling.top_p = 0; }, "top_p", "", "top_p"},
      {"top_logprobs past the limit",
       [](GenerationRequest& r) { r.sampling.top_logprobs = kMaxTopLogprobs + 1; }, "top_logprobs", "",
       "top_logprobs"},
      {"a bias that is not finite", [](GenerationRequest& r) { r.sampling.logit_bias = {{7, NAN}}; }, "logit_bias", "",
       "logit_bias[7]"},
      {"a bias for a token outside the vocabulary", [](GenerationRequest& r) { r.sampling.logit_bias = {{100, 1}}; },
       "logit_bias", "", "logit_bias token id 100 is outside the vocabulary"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    GenerationRequest r = fine();
    c.change(r);
    const auto problem = check_request(r, kBounds);
    ASSERT_TRUE(problem.has_value());
    EXPECT_EQ(problem->param, c.param);
    EXPECT_EQ(problem->code, c.code);
    EXPECT_NE(problem->message.find(c.in_message), std::string::npos) << problem->message;
  }
}

TEST(CheckRequest, RequestsAtEveryEdgePass) {
  EXPECT_FALSE(check_request(fine(), kBounds));
  GenerationRequest edge = fine();
  edge.prompt = {0, 99};
  edge.limits.max_tokens = 30;  // exactly the context
  edge.limits.min_tokens = 30;
  edge.sampling.top_logprobs = kMaxTopLogprobs;
  edge.sampling.logit_bias = {{0, -100}, {99, 100}};
  edge.sampling.prompt_logprobs = kMaxTopLogprobs;
  EXPECT_FALSE(check_request(edge, kBounds));
  // Scoring a prompt alone generates nothing.
  GenerationRequest score = fine();
  score.sampling.prompt_logprobs = 0;
  score.limits.max_tokens = 0;
  EXPECT_FALSE(check_request(score, kBounds));
}

TEST(CheckRequest, ThePromptIsNamedAsTheClientNamedIt) {
  GenerationRequest r = fine();
  r.prompt.assign(40, 1);
  const auto problem = check_request(r, kBounds, "messages");
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->param, "messages");
  EXPECT_EQ(problem->code, "context_length_exceeded");
}

// A prompt that fills the context is the prompt's fault, whatever max_tokens says: a chat's
// default max_tokens is what the prompt leaves, which is then nothing.
TEST(CheckRequest, APromptThatFillsTheContextComesBeforeMaxTokens) {
  GenerationRequest r = fine();
  r.prompt.assign(33, 1);
  r.limits.max_tokens = kBounds.max_model_len - 33;
  const auto problem = check_request(r, kBounds);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->param, "prompt");
}

}  // namespace
}  // namespace orzo
