// The trained stories260K model in its GGUF and HF-safetensors forms: same numbers from
// both, the same greedy story as transformers, and logits that do not depend on how a
// sequence is batched, chunked or split across layer ranges.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/model_harness.hpp"

namespace orzo {
namespace {

using testing::max_abs_diff;
using testing::Pipeline;

const std::string kDir = std::string(ORZO_SHARED_DIR) + "/models/stories260K";
const std::vector<int32_t> kOnceUponATime = {1, 403, 407, 261, 378};  // "<s>Once upon a time"
constexpr int32_t kBlocksPerSeq = 8;                                   // 128 positions

CpuBackend::Options options(int32_t sequences, LayerRange range = {}) {
  CpuBackend::Options o;
  o.range = range;
  o.kv_blocks = sequences * kBlocksPerSeq;
  o.threads = 2;
  return o;
}

class Stories260K : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hf_ = Model::load(kDir + "/hf");
    gguf_ = Model::load(kDir + "/stories260K.gguf");
  }
  static void TearDownTestSuite() {
    hf_.reset();
    gguf_.reset();
  }
  static std::shared_ptr<const Model> hf_, gguf_;
};
std::shared_ptr<const Model> Stories260K::hf_, Stories260K::gguf_;

TEST_F(Stories260K, ConfigsAgree) {
  for (const auto& m : {hf_, gguf_}) {
    const auto& c = m->config();
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.num_layers, 5);
    EXPECT_EQ(c.num_heads, 8);
    EXPECT_EQ(c.num_kv_heads, 4);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.intermediate_size, 172);
  }
  EXPECT_EQ(hf_->config().rope_style, RopeStyle::HalfSplit);
  EXPECT_EQ(gguf_->config().rope_style, RopeStyle::Interleaved);
}

TEST_F(Stories260K, GgufAndSafetensorsGiveTheSameLogits) {
  CpuBackend a(hf_, options(1)), b(gguf_, options(1));
  Pipeline pa({&a}, kBlocksPerSeq), pb({&b}, kBlocksPerSeq);
  std::vector<int32_t> prompt = kOnceUponATime;
  for (int32_t t : {283, 500, 3, 260, 411, 299, 17, 42}) prompt.push_back(t);
  const auto la = pa.prefill_all(0, prompt), lb = pb.prefill_all(0, prompt);
  ASSERT_EQ(la.size(), prompt.size() * 512);
  EXPECT_LT(max_abs_diff(la.data(), lb.data(), la.size()), 1e-5f);
  EXPECT_EQ(pa.greedy(0, kOnceUponATime, 64, 512), pb.greedy(0, kOnceUponATime, 64, 512));
}

TEST_F(Stories260K, GreedyStoryMatchesTransformers) {
  std::ifstream in(std::string(ORZO_FIXTURES_DIR) + "/stories260K/expected.json");
  ASSERT_TRUE(in) << "missing fixture: run tools/make_fixtures.py";
  const auto expected = nlohmann::json::parse(in);
  ASSERT_EQ(expected["prompts"][0].get<std::vector<int32_t>>(), kOnceUponATime);
  const auto want = expected["greedy"][0].get<std::vector<int32_t>>();
  const auto want_logits = testing::read_f32_file(std::string(ORZO_FIXTURES_DIR) + "/stories260K/" +
                                                  expected["logits_file"].get<std::string>());
  for (const auto& m : {hf_, gguf_}) {
    CpuBackend backend(m, options(1));
    Pipeline p({&backend}, kBlocksPerSeq);
    const auto logits = p.prefill_all(0, kOnceUponATime);
    ASSERT_EQ(logits.size(), want_logits.size());
    EXPECT_LT(max_abs_diff(logits.data(), want_logits.data(), logits.size()), 1e-4f) << m->source();
    EXPECT_EQ(p.greedy(0, kOnceUponATime, static_cast<int>(want.size()), 512), want) << m->source();
  }
}

// A sequence's logits alone, batched with 15 others of other lengths, and prefilled in
// chunks of 7 must agree to float rounding.
TEST_F(Stories260K, LogitsDoNotDependOnBatching) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(3, 511);
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 16; ++s) {
    std::vector<int32_t> p(static_cast<size_t>(5 + 6 * s));
    for (auto& t : p) t = tok(rng);
    prompts.push_back(p);
  }
  CpuBackend alone_backend(hf_, options(1));
  Pipeline alone({&alone_backend}, kBlocksPerSeq);
  const auto reference = alone.prefill_all(0, prompts[9]);

  CpuBackend batched_backend(hf_, options(16));
  Pipeline batched({&batched_backend}, kBlocksPerSeq);
  ForwardBatch b;
  for (int32_t s = 0; s < 16; ++s) {
    b.block_tables.push_back(batched.table(s));
    const auto first_row = static_cast<int32_t>(b.rows());
    b.add_chunk(s, prompts[static_cast<size_t>(s)].data(), static_cast<int32_t>(prompts[static_cast<size_t>(s)].size()), 0,
                false);
    if (s == 9)
      for (int32_t r = first_row; r < b.rows(); ++r) b.logit_rows.push_back(r);
  }
  const auto together = batched.run(b);
  ASSERT_EQ(together.size(), reference.size());
  EXPECT_LT(max_abs_diff(together.data(), reference.data(), reference.size()), 1e-5f);

  CpuBackend chunked_backend(hf_, options(1));
  Pipeline chunked({&chunked_backend}, kBlocksPerSeq);
  const auto& p = prompts[9];
  std::vector<float> pieces;
  for (size_t start = 0; start < p.size(); start += 7) {
    std::vector<int32_t> chunk(p.begin() + static_cast<long>(start), p.begin() + static_cast<long>(std::min(p.size(), start + 7)));
    const auto l = chunked.prefill_all(0, chunk, static_cast<int32_t>(start));
    pieces.insert(pieces.end(), l.begin(), l.end());
  }
  ASSERT_EQ(pieces.size(), reference.size());
  EXPECT_LT(max_abs_diff(pieces.data(), reference.data(), reference.size()), 1e-5f);
}

TEST_F(Stories260K, TwoLayerRangesEqualOne) {
  for (const auto& m : {hf_, gguf_}) {
    CpuBackend whole(m, options(1));
    CpuBackend front(m, options(1, {0, 2})), back(m, options(1, {2, 5}));
    EXPECT_TRUE(front.embeds());
    EXPECT_FALSE(front.produces_logits());
    EXPECT_FALSE(back.embeds());
    EXPECT_TRUE(back.produces_logits());
    Pipeline one({&whole}, kBlocksPerSeq), two({&front, &back}, kBlocksPerSeq);
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 283, 500, 3, 260};
    const auto a = one.prefill_all(0, prompt), b = two.prefill_all(0, prompt);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(max_abs_diff(a.data(), b.data(), a.size()), 1e-6f);
    EXPECT_EQ(one.greedy(0, prompt, 20, 512), two.greedy(0, prompt, 20, 512));
  }
}

TEST_F(Stories260K, MalformedBatchesAreRefused) {
  CpuBackend backend(hf_, options(1));
  std::vector<float> hidden, logits;
  Pipeline p({&backend}, kBlocksPerSeq);
  ForwardBatch bad_token;
  bad_token.block_tables.push_back(p.table(0));
  const int32_t big = 512;
  bad_token.add_chunk(0, &big, 1, 0, true);
  EXPECT_THROW(backend.forward(bad_token, hidden, logits), std::invalid_argument);
  ForwardBatch past_table;
  past_table.block_tables.push_back({0});
  const int32_t t = 5;
  past_table.add_chunk(0, &t, 1, 16, true);
  EXPECT_THROW(backend.forward(past_table, hidden, logits), std::invalid_argument);
  ForwardBatch repeated_logits;  // legal, if odd: more logit rows than rows or scratch
  repeated_logits.block_tables.push_back(p.table(0));
  repeated_logits.add_chunk(0, &t, 1, 0, false);
  repeated_logits.logit_rows.assign(600, 0);
  backend.forward(repeated_logits, hidden, logits);
  ASSERT_EQ(logits.size(), 600u * 512);
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + 512),
            std::vector<float>(logits.end() - 512, logits.end()));
  ForwardBatch bad_block;
  bad_block.block_tables.push_back({kBlocksPerSeq});
  bad_block.add_chunk(0, &t, 1, 0, true);
  EXPECT_THROW(backend.forward(bad_block, hidden, logits), std::invalid_argument);
}

}  // namespace
}  // namespace orzo
