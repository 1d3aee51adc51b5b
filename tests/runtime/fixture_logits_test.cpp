// Tiny random-weight checkpoints of every supported architecture, written by
// tools/make_fixtures.py with the logits and greedy tokens HF transformers computes for
// them. Our forward pass must agree at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include <fstream>

#include <nlohmann/json.hpp>

#include "kernels/cpu/matmul_q8.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/each_isa.hpp"
#include "tests/support/model_harness.hpp"

namespace orzo {
namespace {

using testing::max_abs_diff;
using testing::Pipeline;

constexpr int32_t kBlocksPerSeq = 8;  // 128 positions: the longest prompt (phi3's 47) plus 32 tokens

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

// Where matmul rounds activations to 8-bit blocks (the block types, kernels/cpu/matmul_q8.hpp)
// each product's input is off by up to half a step of 1/127 of its block's largest value:
// for rows of 32 with amax ~2.5 rms that is ~0.6% rms of each input, hence of each
// product's output, and the logits sit behind nine products (two layers of q/k/v, o,
// gate/up, down, and the head), so ~sqrt(9) * 0.6% ~ 2% rms of the logits (measured on
// the llama fixture, q8_0 and q4_0: 1.0% to 2.1%, the largest difference 0.10 of the
// rms). A greedy continuation then diverges wherever two logits are closer than that,
// which the fixture's margins do not exclude, so only the logits are compared.
constexpr double kInt8RoundingRms = 0.03;
// Two int8 digits, the default for block types where the level has them (kernels/cpu/
// matmul.hpp), round each input 256 times finer: ~0.01% rms of the logits (measured on the
// llama fixture, q8_0 and q4_0: 0.004% to 0.009%), far inside the margins of its greedy
// continuations.
constexpr double kTwoDigitRoundingRms = kInt8RoundingRms / 128;
// Rounding to bf16 puts each input off by at most 2^-8 of itself, uniformly: ~0.15% rms per
// product, ~0.5% behind nine of them (measured on the llama fixture's bf16 file, the three
// prompts: 0.24%, 0.49%, 0.77%).
constexpr double kBf16RoundingRms = 0.015;

// Checks logits at every position (max abs diff <= tol, or where activations are rounded
// an rms difference below `rounding_rms` of the logits' rms and a largest one below five
// times that) and, when `greedy` is given, the greedy continuation of each prompt, on a
// backend serving contexts of `max_model_len` (0: the model's).
void check_model(const std::string& path, const Expected& e, float tol, const std::vector<std::vector<int32_t>>* greedy,
                 cpu::MatmulOptions matmul = {}, double rounding_rms = 0.0, int64_t max_model_len = 0,
                 DType kv_dtype = DType::F32) {
  SCOPED_TRACE(path);
  auto model = Model::load(path);
  ASSERT_EQ(model->config().vocab_size, e.vocab);
  CpuBackend::Options o;
  o.matmul = matmul;
  o.kv_dtype = kv_dtype;
  o.max_model_len = max_model_len;
  o.kv_blocks = kBlocksPerSeq;
  o.threads = 2;
  CpuBackend backend(model, o);
  Pipeline p({&backend}, kBlocksPerSeq);
  size_t offset = 0;
  for (size_t i = 0; i < e.prompts.size(); ++i) {
    const auto logits = p.prefill_all(0, e.prompts[i]);
    ASSERT_LE(offset + logits.size(), e.logits.size());
    if (rounding_rms > 0.0) {
      double diff2 = 0.0, ref2 = 0.0;
      for (size_t c = 0; c < logits.size(); ++c) {
        const double d = logits[c] - e.logits[offset + c];
        diff2 += d * d;
        ref2 += double{e.logits[offset + c]} * e.logits[offset + c];
      }
      const double rms = std::sqrt(ref2 / static_cast<double>(logits.size()));
      const double rel = std::sqrt(diff2 / ref2);
      EXPECT_LE(rel, rounding_rms) << "prompt " << i;
      EXPECT_LE(max_abs_diff(logits.data(), e.logits.data() + offset, logits.size()), 5 * rounding_rms * rms)
          << "prompt " << i << ", rms difference " << rel << " of the logits' rms";
    } else {
      EXPECT_LE(max_abs_diff(logits.data(), e.logits.data() + offset, logits.size()), tol) << "prompt " << i;
    }
    offset += logits.size();
    if (greedy) {
      const auto& tokens = (*greedy)[i];
      EXPECT_EQ(p.greedy(0, e.prompts[i], static_cast<int32_t>(tokens.size()), e.vocab), tokens) << "prompt " << i;
    }
  }
  EXPECT_EQ(offset, e.logits.size());
}

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, SafetensorsMatchTransformers) {
  orzo::testing::for_each_isa([&] {
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
    const Expected e = read_expected(dir, "expected_logits.bin");
    check_model(dir, e, 1e-4f, &e.greedy);
  });
}

// An f16 KV cache rounds each key and value to 11 significant bits, at most 2^-12 of itself
// (~0.03% rms), and the logits sit behind every layer's attention: measured on these
// fixtures 0.016% to 0.1% rms of the logits, 0.37% on gemma3's longest prompt, less than
// bf16 activations move them.
constexpr double kF16KvRoundingRms = 0.006;

TEST_P(Fixture, HalfKvCacheStaysWithinItsRounding) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
  check_model(dir, read_expected(dir, "expected_logits.bin"), 1e-4f, nullptr, {}, kF16KvRoundingRms, 0, DType::F16);
}

INSTANTIATE_TEST_SUITE_P(Architectures, Fixture,
                         ::testing::Values("llama", "llama3", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "smollm3",
                                           "phi3", "mixtral", "qwen2moe", "qwen3moe"));

// Per-layer and per-model terms (which layers slide, Gemma 3's two RoPE tables, soft caps;
// Phi-3's LongRope table, partial rotary and fused matrices; the experts' routing) must not
// depend on how a step is cut: the longest prompt prefilled in chunks of 5, batched with the
// other two prompts (whose rows then share its experts), and run as two layer ranges (Gemma
// 3's front range slides everywhere, its back range holds the global layer; Qwen2-MoE's dense
// layer sits in one) all give its logits alone; with an f32 KV cache and with an f16 one.
class StepInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(StepInvariance, ChunksBatchesAndRangesGiveTheSameLogits) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
  const Expected e = read_expected(dir, "expected_logits.bin");
  auto model = Model::load(dir);
  const int64_t layers = model->config().num_layers;
  const std::vector<int32_t>& prompt = e.prompts.back();
  std::vector<float> f32_reference;
  for (DType kv : {DType::F32, DType::F16}) {
    SCOPED_TRACE(std::string("KV cache ") + dtype_name(kv));
    const auto backend = [&](int32_t sequences, LayerRange range = {}) {
      CpuBackend::Options o;
      o.range = range;
      o.kv_blocks = sequences * kBlocksPerSeq;
      o.threads = 2;
      o.kv_dtype = kv;
      return std::make_unique<CpuBackend>(model, o);
    };
    auto one = backend(1);
    Pipeline alone({one.get()}, kBlocksPerSeq);
    const auto reference = alone.prefill_all(0, prompt);
    if (kv == DType::F32)
      f32_reference = reference;
    else
      EXPECT_NE(reference, f32_reference) << "the f16 cache rounds nothing";

    auto chunk_backend = backend(1);
    Pipeline chunked({chunk_backend.get()}, kBlocksPerSeq);
    std::vector<float> pieces;
    for (size_t start = 0; start < prompt.size(); start += 5) {
      const std::vector<int32_t> chunk(prompt.begin() + static_cast<long>(start),
                                       prompt.begin() + static_cast<long>(std::min(prompt.size(), start + 5)));
      const auto l = chunked.prefill_all(0, chunk, static_cast<int32_t>(start));
      pieces.insert(pieces.end(), l.begin(), l.end());
    }
    ASSERT_EQ(pieces.size(), reference.size());
    EXPECT_LT(max_abs_diff(pieces.data(), reference.data(), reference.size()), 1e-5f);

    const auto n = static_cast<int32_t>(e.prompts.size());
    auto many = backend(n);
    Pipeline batched({many.get()}, kBlocksPerSeq);
    ForwardBatch b;
    for (int32_t s = 0; s < n; ++s) {
      const auto& p = e.prompts[static_cast<size_t>(s)];
      b.block_tables.push_back(batched.table(s));
      const auto first = static_cast<int32_t>(b.rows());
      b.add_chunk(s, p.data(), static_cast<int32_t>(p.size()), 0, false);
      if (s == n - 1)
        for (int32_t r = first; r < b.rows(); ++r) b.logit_rows.push_back(r);
    }
    const auto together = batched.run(b);
    ASSERT_EQ(together.size(), reference.size());
    EXPECT_LT(max_abs_diff(together.data(), reference.data(), reference.size()), 1e-5f);

    auto front = backend(1, {0, layers / 2}), back = backend(1, {layers / 2, layers});
    Pipeline split({front.get(), back.get()}, kBlocksPerSeq);
    const auto halves = split.prefill_all(0, prompt);
    ASSERT_EQ(halves.size(), reference.size());
    EXPECT_LT(max_abs_diff(halves.data(), reference.data(), reference.size()), 1e-6f);
    if (kv == DType::F32) {
      EXPECT_EQ(split.greedy(0, prompt, 32, e.vocab), e.greedy.back());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, StepInvariance,
                         ::testing::Values("gemma2", "gemma3", "phi3", "mixtral", "qwen2moe", "qwen3moe"));

// LongRope's short factors: a backend whose context stays within the original one rotates
// with them, as transformers does a sequence that short (the fixture's prompts, all longer,
// test the long ones). From config.json and from the GGUF's factor tensors and keys.
TEST(Phi3Fixture, ContextsWithinTheOriginalLengthUseTheShortFactors) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/phi3";
  std::ifstream in(dir + "/expected.json");
  const auto j = nlohmann::json::parse(in).at("short_context");
  Expected e;
  e.prompts = {j.at("prompt").get<std::vector<int32_t>>()};
  e.greedy = {j.at("greedy").get<std::vector<int32_t>>()};
  e.vocab = 128;
  e.logits = testing::read_f32_file(dir + "/" + j.at("logits_file").get<std::string>());
  const auto context = j.at("max_model_len").get<int64_t>();
  for (const std::string& path : {dir, dir + "/model-f32.gguf"}) check_model(path, e, 1e-4f, &e.greedy, {}, 0.0, context);
}

// The GGUF architectures: llama (q/k rows permuted for interleaved RoPE, Llama 3 scaling as
// a rope_freqs tensor), qwen2 (biases), qwen3 (q/k norms), gemma3 (norms stored as 1 + w,
// llama.cpp's fixed layer pattern and local RoPE base), smollm3 (permuted like llama, every
// fourth layer without RoPE), phi3 (fused attn_qkv and gate|up ffn_up, LongRope's factors as
// tensors, partial rotary as rope.dimension_count), and the experts stacked per projection:
// llama with experts (Mixtral), qwen2moe (a shared expert; a dense layer, known by its missing
// router), qwen3moe.
class GgufFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixture, F32GgufMatchesTransformers) {
  orzo::testing::for_each_isa([&] {
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
    const Expected e = read_expected(dir, "expected_logits.bin");
    check_model(dir + "/model-f32.gguf", e, 1e-4f, &e.greedy);
  });
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufFixture,
                         ::testing::Values("llama", "llama3", "qwen2", "qwen3", "gemma3", "smollm3", "phi3",
                                           "mixtral", "qwen2moe", "qwen3moe"));

// Stored in a narrower type, the weights are exactly the dequantized values transformers
// was given, so the only difference left is f32 rounding, and for block types on a level
// with two int8 digits that of the activations (above).
class QuantizedGguf : public ::testing::TestWithParam<std::string> {};

// The type of the fixture's file for `dtype` (its block types; the rest is any float type).
DType stored_type(const std::string& dtype) {
  return dtype == "q8_0" ? DType::Q8_0 : dtype == "q4_0" ? DType::Q4_0 : DType::F16;
}

TEST_P(QuantizedGguf, MatchesTransformersOnDequantizedWeights) {
  orzo::testing::for_each_isa([&] {
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/llama";
    const std::string dtype = GetParam();
    const Expected e = read_expected(dir, "expected_logits-" + dtype + ".bin");
    std::ifstream in(dir + "/expected.json");
    const auto j = nlohmann::json::parse(in);
    const auto greedy = j.at("greedy_by_dtype").at(dtype).get<std::vector<std::vector<int32_t>>>();
    const bool margin_ok = j.at("greedy_margin_ok_by_dtype").at(dtype).get<bool>();
    const bool two_digits = dtype_is_quantized(stored_type(dtype)) && cpu::has_matmul_q16();
    check_model(dir + "/model-" + dtype + ".gguf", e, 1e-4f, margin_ok ? &greedy : nullptr, {},
                two_digits ? kTwoDigitRoundingRms : 0.0);
  });
}

// The same with activations rounded to 8 bits for the block types (above): the logits only.
TEST_P(QuantizedGguf, Int8ActivationsStayWithinTheirRounding) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/llama";
  const std::string dtype = GetParam();
  const DType stored = stored_type(dtype);
  if (!dtype_is_quantized(stored)) GTEST_SKIP() << dtype << " has no integer path";
  orzo::testing::for_each_isa([&] {
    if (!cpu::matmul_q8_supports(stored)) return;  // nor has this ISA level
    check_model(dir + "/model-" + dtype + ".gguf", read_expected(dir, "expected_logits-" + dtype + ".bin"), 1e-4f,
                nullptr, cpu::MatmulOptions{true, false, false}, kInt8RoundingRms);
  });
}

// Int8 batches take a prompt's products to one int8 digit where the level has no AMX tiles
// (kernels/cpu/matmul.hpp), but a step that scores the prompt (the logits of its rows before
// the last) keeps two digits on every level: its log-probabilities are the model's; and so
// does a prompt shorter than 32 tokens (CpuBackend::forward).
TEST(QuantizedGguf, ScoringStepsKeepTwoDigitsUnderInt8Batches) {
  auto model = Model::load(std::string(ORZO_FIXTURES_DIR) + "/llama/model-q4_0.gguf");
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((7 * i + 3) % static_cast<size_t>(model->config().vocab_size));
  orzo::testing::for_each_isa([&] {
    const auto logits = [&](bool int8_batches, bool score, size_t tokens = 40) {
      const std::vector<int32_t> head(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(tokens));
      CpuBackend::Options o;
      o.matmul = cpu::MatmulOptions{false, true, false, int8_batches};
      o.kv_blocks = kBlocksPerSeq;
      o.threads = 2;
      CpuBackend backend(model, o);
      Pipeline p({&backend}, kBlocksPerSeq);
      if (score) return p.prefill_all(0, head);
      ForwardBatch b;
      b.block_tables.push_back(p.table(0));
      b.add_chunk(0, head.data(), static_cast<int32_t>(head.size()), 0, true);
      return p.run(b);
    };
    EXPECT_EQ(logits(true, true), logits(false, true)) << "a scoring step";
    EXPECT_EQ(logits(true, false, 20), logits(false, false, 20)) << "a prompt of 20 tokens";
    const int64_t from = cpu::kernels().one_digit_from_rows;
    if (from > 0 && from <= static_cast<int64_t>(prompt.size()))
      EXPECT_NE(logits(true, false), logits(false, false)) << "a prompt's last logits, one digit against two";
    else
      EXPECT_EQ(logits(true, false), logits(false, false)) << "a level without int8 batches";
  });
}

// The same with activations rounded to bf16 for BF16 weights, where the level has the BF16
// dot product (kernels/cpu/matmul.hpp).
TEST(Bf16Gguf, Bf16ActivationsStayWithinTheirRounding) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/llama";
  bool ran = false;
  orzo::testing::for_each_isa([&] {
    if (!cpu::kernels().matmul_bf16) return;  // this ISA level has no BF16 dot product
    ran = true;
    check_model(dir + "/model-bf16.gguf", read_expected(dir, "expected_logits-bf16.bin"), 1e-4f, nullptr,
                cpu::MatmulOptions{false, true, false}, kBf16RoundingRms);
  });
  if (!ran) GTEST_SKIP() << "no ISA level of this CPU has AVX-512 BF16";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizedGguf, ::testing::Values("f16", "bf16", "q8_0", "q4_0"));

// Experts stored as Q8_0 (the router stays F32, as llama.cpp keeps it): each expert's
// product takes the block types' path, over the few rows routed to it.
TEST(MoeGguf, Q8ExpertsMatchTransformersOnDequantizedWeights) {
  orzo::testing::for_each_isa([&] {
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/qwen3moe";
    const Expected e = read_expected(dir, "expected_logits-q8_0.bin");
    std::ifstream in(dir + "/expected.json");
    const auto j = nlohmann::json::parse(in);
    const auto greedy = j.at("greedy_by_dtype").at("q8_0").get<std::vector<std::vector<int32_t>>>();
    const bool margin_ok = j.at("greedy_margin_ok_by_dtype").at("q8_0").get<bool>();
    check_model(dir + "/model-q8_0.gguf", e, 1e-4f, margin_ok ? &greedy : nullptr, {},
                cpu::has_matmul_q16() ? kTwoDigitRoundingRms : 0.0);
  });
}

}  // namespace
}  // namespace orzo
