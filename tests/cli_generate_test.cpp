// `orzo generate` and `orzo chat` as a user runs them: stories260K's greedy story equals
// transformers' from either file form, the default model runs with no -m, and bad input is one
// line and a non-zero exit.

#include "tests/cli_harness.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace orzo {
namespace {

using testing::CliRun;
using testing::orzo;

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K";

// transformers' greedy continuation of "Once upon a time" (tools/make_fixtures.py).
std::string transformers_text() {
  std::ifstream in(std::string(ORZO_FIXTURES_DIR) + "/stories260K/expected.json");
  return nlohmann::json::parse(in)["text"].get<std::string>();
}

TEST(CliGenerate, GreedyStoryEqualsTransformersFromGgufAndHfDirectory) {
  const std::string expected = transformers_text() + "\n";
  for (const std::string model : {kStories + "/stories260K.gguf", kStories + "/hf"}) {
    const CliRun r = orzo("generate -m '" + model + "' -p 'Once upon a time' --temperature 0 -n 64 -t 1", false);
    ASSERT_EQ(r.status, 0) << model;
    EXPECT_EQ(r.out, expected) << model;
  }
}

TEST(CliGenerate, ReportsTimingAndStopsAtAStopString) {
  const CliRun r = orzo("generate -m '" + kStories + "/stories260K.gguf' -p 'Once upon a time' --temperature 0 -n 64 "
                        "--stop 'park' -t 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find(", there was a little girl named Lily. She loved to play outside in the \n"), 0u) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finish: stop"), std::string::npos) << r.out;
}

TEST(CliGenerate, RunsTheDefaultModelWithoutArguments) {
  const CliRun r = orzo("generate -n 8 --seed 1 -t 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("default model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated 8 tokens"), std::string::npos) << r.out;
}

TEST(CliGenerate, BadInputIsOneLineAndNonZero) {
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"generate -m /nonexistent/model.gguf", "/nonexistent/model.gguf"},
      {"generate -m '" + kStories + "/stories260K.gguf' --temperature -1", "--temperature"},
      {"generate -m '" + kStories + "/stories260K.gguf' -n 5000", "exceeds the context length"},
      {"generate -m '" + kStories + "/stories260K.gguf' --placement cpu:0-9", "placement"},
      {"chat -m '" + kStories + "/stories260K.gguf'", "no chat template"},
  };
  for (const auto& c : cases) {
    const CliRun r = orzo(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.status, -1) << c.args << ": killed by a signal";
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << " printed: " << r.out;
  }
}

}  // namespace
}  // namespace orzo
