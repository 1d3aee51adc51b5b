// `orzo quantize` end to end: what it writes loads in orzo and runs, an HF checkpoint
// converts to the GGUF llama.cpp's converter would write (same logits as transformers, the
// same Q8_0 bytes as the fixture made with gguf.quants), bad input leaves no file; and
// --quantize at load gives the model the written file holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/cli_harness.hpp"
#include "tests/support/model_harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;
using orzo::testing::expect_refused;
using orzo::testing::orzo;

class QuantizeCommand : public orzo::testing::TempDirTest {
 protected:
  // A random Llama whose every matrix splits into 256-weight blocks; `tied`: its embedding
  // is its output matrix.
  std::string make_model(const std::string& name, const std::string& format = "gguf", bool tied = false) const {
    const std::string out = path(name);
    const std::string cmd = "'" + std::string(ORZO_MAKE_MODEL_PATH) +
                            "' --shape tiny --dim 256 --hidden 512 --heads 4 --kv-heads 2 --layers 2 --vocab 512"
                            " --dtype f32 --seed 5 " + (tied ? "--tied" : "--untied") + " --format " + format +
                            " --out '" + out + "' > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return out;
  }
  void quantize(const std::string& in, const std::string& out, const std::string& type) const {
    const auto r = orzo("quantize '" + in + "' '" + out + "' " + type);
    ASSERT_EQ(r.status, 0) << r.out;
  }
  // The F32 model at f32, quantized to each type, gives kPrompt the logits of its weights
  // dequantized back to F32 (to `tolerance` of their range), under `matmul`.
  void expect_each_runs_as_dequantized(const std::string& f32, const std::vector<std::string>& types,
                                       cpu::MatmulOptions matmul = {}, float tolerance = 1e-4f) const;
};

std::vector<float> logits_of(const std::string& model_path, const std::vector<int32_t>& prompt,
                             cpu::MatmulOptions matmul = {}) {
  auto model = Model::load(model_path);
  CpuBackend::Options o;
  o.kv_blocks = 4;
  o.threads = 2;
  o.matmul = matmul;
  CpuBackend backend(model, o);
  orzo::testing::Pipeline p({&backend}, 4);
  return p.prefill_all(0, prompt);
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

const std::vector<int32_t> kPrompt = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33};

// The two models give kPrompt the same logits, bit for bit.
void expect_same_logits(const std::shared_ptr<const Model>& a, const std::shared_ptr<const Model>& b) {
  CpuBackend::Options o;
  o.kv_blocks = 4;
  o.threads = 2;
  CpuBackend backend_a(a, o), backend_b(b, o);
  orzo::testing::Pipeline pa({&backend_a}, 4), pb({&backend_b}, 4);
  EXPECT_EQ(pa.prefill_all(0, kPrompt), pb.prefill_all(0, kPrompt));
}

// A quantized file runs through the kernels of its types; the same weights dequantized to
// F32 run through the F32 path. With f32 activations (CpuBackend's default) both compute the
// same function of the same weights, so they agree to f32 rounding: 1e-4 of the logits' range.
TEST_F(QuantizeCommand, EveryTypeRunsAsItsDequantizedWeights) {
  expect_each_runs_as_dequantized(make_model("f32.gguf"), {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
                                                            "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "Q4_K_M", "Q3_K_M"});
}

// Where the CPU level packs a tied output's rows (packed_rows.hpp), the embedding gathers its
// rows from the tiles and the stored ones go back to the kernel: the logits are still those
// of the dequantized weights.
TEST_F(QuantizeCommand, TiedEmbeddingsOfPackedTypesRunAsTheirDequantizedWeights) {
  const std::string tied = make_model("tied.gguf", "gguf", true);
  expect_each_runs_as_dequantized(tied, {"q4_0", "q4_1", "q4_k", "q6_k", "Q4_K_M", "f16"});
  // BF16 rows pack for bf16 activations (the engine's default), which move the logits by
  // their rounding: a gather of the wrong rows would move them by their whole range.
  expect_each_runs_as_dequantized(tied, {"bf16"}, cpu::MatmulOptions{false, true, false}, 2e-2f);
}

void QuantizeCommand::expect_each_runs_as_dequantized(const std::string& f32, const std::vector<std::string>& types,
                                                      cpu::MatmulOptions matmul, float tolerance) const {
  const auto reference = logits_of(f32, kPrompt);
  for (const std::string& type : types) {
    SCOPED_TRACE(type);
    const std::string q = path(type + "-of-" + fs::path(f32).stem().string() + ".gguf"), back = path(type + "-f32.gguf");
    quantize(f32, q, type);
    quantize(q, back, "f32");
    const auto quantized = logits_of(q, kPrompt, matmul), dequantized = logits_of(back, kPrompt, matmul);
    ASSERT_EQ(quantized.size(), dequantized.size());
    EXPECT_LE(orzo::testing::max_abs_diff(quantized.data(), dequantized.data(), quantized.size()),
              tolerance * max_abs(dequantized));
    // Against the unquantized weights, even Q2_K keeps the logits within half their range.
    const float moved = orzo::testing::max_abs_diff(quantized.data(), reference.data(), quantized.size());
    EXPECT_LE(moved, 0.5f * max_abs(reference));
  }
}

// The HF fixtures converted to F32 GGUF (names, q/k permutation, rope_freqs for Llama 3,
// Mistral as llama with its sliding window, Qwen biases and q/k norms, Gemma 3's norms as
// 1 + w, Phi-3's fused matrices and LongRope, the Mixture-of-Experts models' experts stacked,
// Qwen2-MoE's shared expert and its dense layer) reproduce the logits transformers computed
// from the checkpoint.
TEST_F(QuantizeCommand, HfFixturesConvertToGgufWithTransformersLogits) {
  for (const char* arch :
       {"llama", "llama3", "mistral", "qwen2", "qwen3", "gemma3", "smollm3", "phi3", "mixtral", "qwen2moe", "qwen3moe"}) {
    SCOPED_TRACE(arch);
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + arch;
    const std::string out = path(std::string(arch) + ".gguf");
    quantize(dir, out, "f32");
    std::ifstream in(dir + "/expected.json");
    const auto j = nlohmann::json::parse(in);
    const auto expected = orzo::testing::read_f32_file(dir + "/expected_logits.bin");
    const auto prompt = j["prompts"][0].get<std::vector<int32_t>>();
    const auto logits = logits_of(out, prompt);
    ASSERT_LE(logits.size(), expected.size());
    EXPECT_LE(orzo::testing::max_abs_diff(logits.data(), expected.data(), logits.size()), 1e-4f);
  }
}

// The gemma2 fixture's query_pre_attn_scalar (12, head_dim 8) has no GGUF key llama.cpp
// reads: converting it would make another model, so it is refused, saying why.
TEST_F(QuantizeCommand, GemmaOffLlamaCppsFixedRulesIsRefused) {
  const auto r = orzo("quantize '" + std::string(ORZO_FIXTURES_DIR) + "/gemma2' '" + path("g2.gguf") + "' f32");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("query_pre_attn_scalar"), std::string::npos) << r.out;
}

// Every tensor of `theirs` is one of `ours`, of the same shape, type and bytes (the matrices
// only, where `matrices_only`).
void expect_same_tensors(const GgufFile& ours, const GgufFile& theirs, bool matrices_only) {
  ASSERT_EQ(ours.tensors.size(), theirs.tensors.size());
  for (const auto& t : theirs.tensors) {
    const TensorView* mine = nullptr;
    for (const auto& o : ours.tensors)
      if (o.name == t.name) mine = &o;
    ASSERT_NE(mine, nullptr) << t.name;
    if (matrices_only && t.shape.size() < 2) continue;
    ASSERT_EQ(mine->shape, t.shape) << t.name;
    ASSERT_EQ(mine->dtype, t.dtype) << t.name;
    ASSERT_EQ(mine->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(mine->data, t.data, t.nbytes), 0) << t.name;
  }
}

// tools/make_fixtures.py quantized the llama fixture with gguf.quants after llama.cpp's
// permutation; quantizing the checkpoint here must give the same bytes (of the matrices: the
// fixture keeps its norms F32 too, but as written by numpy).
TEST_F(QuantizeCommand, HfQ8_0IsTheFixtureMadeByGgufPy) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/llama";
  for (const char* type : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(type);
    const std::string out = path(std::string(type) + ".gguf");
    quantize(dir, out, type);
    expect_same_tensors(read_gguf(out), read_gguf(dir + "/model-" + type + ".gguf"), true);
  }
}

// Phi-3 as llama.cpp's converter writes it (the fixture's GGUF, made by gguf-py to its rules):
// attn_qkv and the gate|up ffn_up fused, LongRope's factors as tensors, the rotary dims, the
// original context and the attention factor as keys.
TEST_F(QuantizeCommand, Phi3IsWrittenAsLlamaCppsConverterWritesIt) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/phi3", out = path("phi3.gguf");
  quantize(dir, out, "f32");
  const GgufFile ours = read_gguf(out), theirs = read_gguf(dir + "/model-f32.gguf");
  expect_same_tensors(ours, theirs, false);
  for (const char* key : {"phi3.rope.dimension_count", "phi3.rope.scaling.original_context_length",
                          "phi3.attention.sliding_window", "phi3.context_length"})
    EXPECT_EQ(ours.metadata.find_int(key), theirs.metadata.find_int(key)) << key;
  EXPECT_FLOAT_EQ(static_cast<float>(ours.metadata.get_float("phi3.rope.scaling.attn_factor")),
                  static_cast<float>(theirs.metadata.get_float("phi3.rope.scaling.attn_factor")));
}

// The Mixture-of-Experts checkpoints as llama.cpp's converter writes them (the fixtures' GGUFs,
// made by gguf-py to its rules): each projection's experts stacked in one [experts, rows,
// cols] tensor, Mixtral as llama with experts (q/k permuted), Qwen2-MoE's shared-expert gate
// a vector, the expert keys; quantized, the experts are the bytes gguf.quants writes.
TEST_F(QuantizeCommand, MixturesOfExpertsAreWrittenAsLlamaCppsConverterWritesThem) {
  for (const char* arch : {"mixtral", "qwen2moe", "qwen3moe"}) {
    SCOPED_TRACE(arch);
    const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/" + arch, out = path(std::string(arch) + ".gguf");
    quantize(dir, out, "f32");
    const GgufFile ours = read_gguf(out), theirs = read_gguf(dir + "/model-f32.gguf");
    expect_same_tensors(ours, theirs, false);
    const std::string p = ours.metadata.get_string("general.architecture") + ".";
    EXPECT_EQ(p, theirs.metadata.get_string("general.architecture") + ".");
    for (const char* key : {"expert_count", "expert_used_count", "expert_feed_forward_length",
                            "expert_shared_feed_forward_length", "block_count"})
      EXPECT_EQ(ours.metadata.find_int(p + key), theirs.metadata.find_int(p + key)) << key;
    EXPECT_EQ(ours.metadata.get_bool(p + "expert_weights_norm"), Model::load(dir)->config().norm_topk_prob);
  }
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/qwen3moe", q8 = path("qwen3moe-q8_0.gguf");
  quantize(dir, q8, "q8_0");
  expect_same_tensors(read_gguf(q8), read_gguf(dir + "/model-q8_0.gguf"), true);
  // Quantizing at load gives the model the file holds.
  expect_same_logits(Model::load(dir, "Q4_K_M"), Model::load([&] {
                       const std::string mix = path("qwen3moe-q4_k_m.gguf");
                       quantize(dir, mix, "Q4_K_M");
                       return mix;
                     }()));
}

// A checkpoint missing an expert its config counts is refused, naming it; nothing is written.
TEST_F(QuantizeCommand, AMissingExpertIsRefused) {
  const std::string fixture = std::string(ORZO_FIXTURES_DIR) + "/mixtral", dir = path("mixtral");
  fs::create_directory(dir);
  fs::create_symlink(fixture + "/model.safetensors", dir + "/model.safetensors");
  std::ifstream in(fixture + "/config.json");
  auto config = nlohmann::json::parse(in);
  config["num_local_experts"] = config["num_local_experts"].get<int>() + 1;
  std::ofstream(dir + "/config.json") << config.dump();
  const std::string out = path("out.gguf");
  expect_refused("quantize '" + dir + "' '" + out + "' f32", "expert 8 of model.layers.");
  EXPECT_FALSE(fs::exists(out));
}

// --quantize re-encodes at load with the same recipe and encoder: the model equals the one
// loaded from orzo quantize's output, logit for logit.
TEST_F(QuantizeCommand, QuantizingAtLoadEqualsLoadingTheQuantizedFile) {
  const std::string f32 = make_model("f32.gguf");
  for (const char* type : {"q8_0", "q4_k", "Q4_K_M", "iq4_xs", "q2_k"}) {
    SCOPED_TRACE(type);
    const std::string q = path(std::string(type) + ".gguf");
    quantize(f32, q, type);
    auto at_load = Model::load(f32, type);
    auto from_file = Model::load(q);
    ASSERT_EQ(at_load->layer(1).w_down.dtype, from_file->layer(1).w_down.dtype);
    ASSERT_EQ(at_load->lm_head().dtype, from_file->lm_head().dtype);
    expect_same_logits(at_load, from_file);
  }
  EXPECT_THROW(Model::load(f32, "q9"), std::invalid_argument);
}

// Phi-3's q, k and v are rows of one attn_qkv: at load they take the fused matrix's type
// (llama.cpp's Q4_K_M gives attn_qkv Q5_K, here Q5_1 for rows of 64), not attn_q's and attn_v's.
TEST_F(QuantizeCommand, FusedMatricesQuantizeAtLoadAsTheirFile) {
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/phi3", q = path("phi3-q4_k_m.gguf");
  quantize(dir, q, "Q4_K_M");
  auto at_load = Model::load(dir, "Q4_K_M");
  auto from_file = Model::load(q);
  EXPECT_EQ(from_file->layer(0).wq.dtype, DType::Q5_1);
  for (int64_t l = 0; l < 2; ++l)
    for (auto part : {&LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv, &LayerWeights::w_gate, &LayerWeights::w_up}) {
      EXPECT_EQ((at_load->layer(l).*part).dtype, (from_file->layer(l).*part).dtype) << l;
    }
  expect_same_logits(at_load, from_file);
}

TEST_F(QuantizeCommand, GenerateTakesQuantize) {
  const std::string f32 = make_model("f32.gguf");
  const auto r = orzo("generate -m '" + f32 + "' --quantize Q4_K_M -p 'Once' --temperature 0 -n 4 -t 1");
  EXPECT_EQ(r.status, 0) << r.out;
  expect_refused("generate -m '" + f32 + "' --quantize q9 -p 'Once' -n 4 -t 1", "--quantize: unknown type 'q9'");
}

TEST_F(QuantizeCommand, BadInputFailsWithOneLineAndNoFile) {
  const std::string f32 = make_model("f32.gguf");
  const std::string out = path("out.gguf");
  expect_refused("quantize '" + path("missing.gguf") + "' '" + out + "' q8_0", "no such file");
  expect_refused("quantize '" + f32 + "' '" + out + "' q9_k", "unknown type 'q9_k'");
  expect_refused("quantize '" + path("f32.gguf") + "' '" + out + "'", "type");  // too few arguments
  // The tiny shape's 64-wide rows do not split into Q4_K's 256-weight blocks; the mix falls back.
  const std::string cmd = "'" + std::string(ORZO_MAKE_MODEL_PATH) + "' --shape tiny --dtype f32 --format gguf --out '" +
                          path("tiny.gguf") + "' > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  expect_refused("quantize '" + path("tiny.gguf") + "' '" + out + "' q4_k", "token_embd.weight: rows of 64");
  // Not a GGUF at all, under an existing output that must survive the failure.
  { std::ofstream(path("junk.gguf")) << "not a model"; }
  { std::ofstream(out) << "keep me"; }
  expect_refused("quantize '" + path("junk.gguf") + "' '" + out + "' q8_0", "junk.gguf");
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  std::ifstream kept(out);
  std::string content;
  std::getline(kept, content);
  EXPECT_EQ(content, "keep me");
  fs::remove(out);
  expect_refused("quantize '" + path("tiny.gguf") + "' '" + out + "' q4_k", "Q4_K");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // The mix takes the same model, falling back per tensor.
  const auto r = orzo("quantize '" + path("tiny.gguf") + "' '" + out + "' Q4_K_M");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace
}  // namespace orzo
