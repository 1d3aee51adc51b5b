#pragma once
// Greedy requests with their expected outputs from the bare forward pass (one sequence at a
// time, one block table for every layer), and the check that an engine gives exactly those:
// what the actor runtime's model tests compare against.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/actor_harness.hpp"
#include "tests/support/model_harness.hpp"

namespace orzo::testing {

struct GreedyCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> expected;  // `generate` tokens
};

// 1 to max_length ids drawn from [3, vocab): clear of a fixture's special ids.
inline std::vector<int32_t> random_prompt(std::mt19937& rng, uint32_t max_length, int32_t vocab) {
  std::vector<int32_t> prompt(1 + rng() % max_length);
  for (auto& id : prompt) id = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3));
  return prompt;
}

inline std::vector<GreedyCase> greedy_cases(const std::string& model_path, const std::vector<std::vector<int32_t>>& prompts,
                                            int generate, int64_t vocab) {
  auto model = Model::load(model_path);
  CpuBackend::Options o;
  o.kv_blocks = 8;
  o.threads = 1;
  CpuBackend backend(model, o);
  Pipeline pipeline({&backend}, 8);
  std::vector<GreedyCase> out;
  for (const auto& prompt : prompts) out.push_back({prompt, pipeline.greedy(0, prompt, generate, vocab)});
  return out;
}

inline std::string fixture_path(const std::string& name) { return std::string(ORZO_FIXTURES_DIR) + "/" + name; }

// The cases of fixture `name` for the prompts make_prompts() returns, computed once per fixture
// and test file (each caller's lambda has a cache of its own) and kept for the process.
template <typename MakePrompts>
const std::vector<GreedyCase>& fixture_cases(const std::string& name, MakePrompts make_prompts, int generate,
                                             int64_t vocab) {
  static std::map<std::string, std::vector<GreedyCase>> by_fixture;
  auto& out = by_fixture[name];
  if (out.empty()) out = greedy_cases(fixture_path(name), make_prompts(), generate, vocab);
  return out;
}

// Sends cases [first, last) at once, each for its expected length and ignoring EOS, and
// expects every output to be its case's, ended once and without error.
inline void expect_greedy(Engine& engine, const std::vector<GreedyCase>& cases, int first, int last) {
  Collector c;
  for (int i = first; i < last; ++i) {
    const auto& g = cases[static_cast<size_t>(i)];
    SessionRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt_ids = g.prompt;
    r.sampling.temperature = 0;
    r.limits.max_tokens = static_cast<int32_t>(g.expected.size());
    r.limits.ignore_eos = true;
    engine.generate(r, c.callbacks(r.id));
  }
  ASSERT_TRUE(c.wait(static_cast<size_t>(last - first), std::chrono::seconds(300)));
  auto outcomes = c.outcomes();
  for (int i = first; i < last; ++i) {
    const auto& o = outcomes["r" + std::to_string(i)];
    ASSERT_EQ(o.completions.size(), 1u) << "request " << i;
    EXPECT_EQ(o.completions[0].message, "") << "request " << i;
    EXPECT_EQ(o.tokens, cases[static_cast<size_t>(i)].expected) << "request " << i;
  }
}

}  // namespace orzo::testing
