// Tiny random-weight checkpoints of every supported architecture, written by
// tools/make_fixtures.py with the logits and greedy tokens HF transformers computes for
// them. Our forward pass must agree at every position.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/model_harness.hpp"

namespace orzo {
namespace {

using testing::max_abs_diff;
using testing::Pipeline;

constexpr int32_t kBlocksPerSeq = 4;  // 64 positions: the longest prompt plus 32 tokens

struct Expected {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> greedy;
  std::vector<float> logits;  // every position of every prompt, concatenated
  int64_t vocab = 0;
};

Expected read_expected(const std::string& dir, const std::string& logits_file) {
  std::ifstream in(dir + "/expected.json");
  if (!in) throw std::runtime_error("missing " + dir + "/expected.json: run tools/make_fixtures.py");
  const auto j = nlohmann::json::parse(in);
  Expected e;
  e.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  e.greedy = j["greedy"].get<std::vector<std::vector<int32_t>>>();
  e.vocab = j["vocab_size"].get<int64_t>();
  e.logits = testing::read_f32_file(dir + "/" + logits_file);
  return e;
}

// Checks logits at every position (max abs diff <= tol) and, when `greedy` is given, the
// 32-token greedy continuation of each prompt.
void check_model(const std::string& path, const Expected& e, float tol, const std::vector<std::vector<int32_t>>* greedy) {
  SCOPED_TRACE(path);
  auto model = Model::load(path);
  ASSERT_EQ(model->config().vocab_size, e.vocab);
  CpuBackend::Options o;
  o.kv_blocks = kBlocksPerSeq;
  o.threads = 2;
  CpuBackend backend(model, o);
  Pipeline p({&backend}, kBlocksPerSeq);
  size_t offset = 0;
  for (size_t i = 0; i < e.prompts.size(); ++i) {
    const auto logits = p.prefill_all(0, e.prompts[i]);
    ASSERT_LE(offset + logits.size(), e.logits.size());
    EXPECT_LE(max_abs_diff(logits.data(), e.logits.data() + offset, logits.size()), tol) << "prompt " << i;
    offset += logits.size();
    if (greedy) {
      EXPECT_EQ(p.greedy(0, e.prompts[i], 32, e.vocab), (*greedy)[i]) << "prompt " << i;
    }
  }
  EXPECT_EQ(offset, e.logits.size());
}

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, SafetensorsMatchTransformers) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
  const Expected e = read_expected(dir, "expected_logits.bin");
  check_model(dir, e, 1e-4f, &e.greedy);
}

INSTANTIATE_TEST_SUITE_P(Architectures, Fixture, ::testing::Values("llama", "llama3", "mistral", "qwen2", "qwen3"));

// The GGUF architectures: llama (q/k rows permuted for interleaved RoPE, Llama 3 scaling as
// a rope_freqs tensor), qwen2 (biases), qwen3 (q/k norms).
class GgufFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixture, F32GgufMatchesTransformers) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
  const Expected e = read_expected(dir, "expected_logits.bin");
  check_model(dir + "/model-f32.gguf", e, 1e-4f, &e.greedy);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufFixture, ::testing::Values("llama", "llama3", "qwen2", "qwen3"));

// Stored in a narrower type, the weights are exactly the dequantized values transformers
// was given, so the only difference left is f32 rounding.
class QuantizedGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedGguf, MatchesTransformersOnDequantizedWeights) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/llama";
  const std::string dtype = GetParam();
  const Expected e = read_expected(dir, "expected_logits-" + dtype + ".bin");
  std::ifstream in(dir + "/expected.json");
  const auto j = nlohmann::json::parse(in);
  const auto greedy = j.at("greedy_by_dtype").at(dtype).get<std::vector<std::vector<int32_t>>>();
  const bool margin_ok = j.at("greedy_margin_ok_by_dtype").at(dtype).get<bool>();
  check_model(dir + "/model-" + dtype + ".gguf", e, 1e-4f, margin_ok ? &greedy : nullptr);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizedGguf, ::testing::Values("f16", "bf16", "q8_0", "q4_0"));

}  // namespace
}  // namespace orzo
