// orzo-make-model end to end: the tiny shape in both formats, read back with the readers;
// the two formats must hold the same weights (GGUF Q/K rows in llama.cpp's interleaved
// order), quantized files must stay close to the F32 one, and bad arguments must fail.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "kernels/cpu/convert.hpp"
#include "runtime/model.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;

std::string tool_path() { return ORZO_MAKE_MODEL_PATH; }

class MakeModel : public testing::TempDirTest {
 protected:

  // The tool's exit status; its output goes to a log in the test directory.
  int run(const std::string& args) const {
    const std::string cmd = "'" + tool_path() + "' " + args + " > '" + path("log") + "' 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log() const {
    std::ifstream in(path("log"));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
};

std::map<std::string, const TensorView*> index(const std::vector<TensorView>& tensors) {
  std::map<std::string, const TensorView*> m;
  for (const auto& t : tensors) m[t.name] = &t;
  return m;
}

std::vector<float> values(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t r = 0; r < t.rows(); ++r) cpu::dequantize_row(t.dtype, t.row(r), t.cols(), out.data() + r * t.cols());
  return out;
}

const std::vector<std::string> kLayerTensors = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};

TEST_F(MakeModel, TinyInBothFormatsHoldsTheSameModel) {
  ASSERT_EQ(run("--shape tiny --dtype f32 --format gguf --seed 7 --out " + path("tiny.gguf")), 0) << log();
  ASSERT_EQ(run("--shape tiny --dtype f32 --format safetensors --seed 7 --out " + path("hf")), 0) << log();

  const GgufFile g = read_gguf(path("tiny.gguf"));
  const GgufMetadata& m = g.metadata;
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(m.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(m.get_int("llama.block_count"), 2);
  EXPECT_EQ(m.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(m.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(m.get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(m.get_int("llama.context_length"), 8192);
  EXPECT_EQ(m.get_int("llama.vocab_size"), 512);
  EXPECT_FLOAT_EQ(static_cast<float>(m.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(m.get_float("llama.rope.freq_base"), 500000.0);

  std::vector<std::string> want = {"token_embd.weight"};
  for (int l = 0; l < 2; ++l)
    for (const auto& t : kLayerTensors) want.push_back("blk." + std::to_string(l) + "." + t + ".weight");
  want.push_back("output_norm.weight");
  want.push_back("output.weight");
  ASSERT_EQ(g.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(g.tensors[i].name, want[i]);
  const auto gg = index(g.tensors);
  EXPECT_EQ(gg.at("token_embd.weight")->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(gg.at("blk.1.attn_k.weight")->shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(gg.at("blk.1.ffn_down.weight")->shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(gg.at("output_norm.weight")->shape, (std::vector<int64_t>{64}));

  std::ifstream config_in(path("hf") + "/config.json");
  const auto config = nlohmann::json::parse(config_in);
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config["hidden_size"], 64);
  EXPECT_EQ(config["intermediate_size"], 172);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 8);
  EXPECT_EQ(config["num_key_value_heads"], 4);
  EXPECT_EQ(config["head_dim"], 8);
  EXPECT_EQ(config["vocab_size"], 512);
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["rope_theta"], 500000.0);
  EXPECT_EQ(config["max_position_embeddings"], 8192);
  EXPECT_EQ(config["bos_token_id"], 1);
  EXPECT_EQ(config["eos_token_id"], 2);

  const auto files = read_safetensors_dir(path("hf"));
  ASSERT_EQ(files.size(), 1u);
  const auto hf = index(files[0].tensors);
  EXPECT_EQ(hf.size(), want.size());
  for (const auto* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                           "model.layers.1.mlp.down_proj.weight", "model.layers.0.self_attn.o_proj.weight"})
    EXPECT_TRUE(hf.count(name)) << name;

  const auto same_bytes = [&](const std::string& hf_name, const std::string& gguf_name) {
    const TensorView& a = *hf.at(hf_name);
    const TensorView& b = *gg.at(gguf_name);
    ASSERT_EQ(a.shape, b.shape) << hf_name;
    ASSERT_EQ(a.nbytes, b.nbytes) << hf_name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << hf_name;
  };
  same_bytes("model.embed_tokens.weight", "token_embd.weight");
  same_bytes("lm_head.weight", "output.weight");
  same_bytes("model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight");
  same_bytes("model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight");
  same_bytes("model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight");

  // llama.cpp's converter: within each head, HF rows (i, i + head_dim / 2) become rows
  // (2i, 2i + 1).
  for (const auto& [hf_name, gguf_name, heads] :
       {std::tuple<std::string, std::string, int64_t>{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight", 8},
        {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight", 4}}) {
    const TensorView& a = *hf.at(hf_name);
    const TensorView& b = *gg.at(gguf_name);
    const int64_t head_dim = a.rows() / heads;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < head_dim / 2; ++i)
        for (int64_t j = 0; j < 2; ++j)
          EXPECT_EQ(std::memcmp(b.row(h * head_dim + 2 * i + j), a.row(h * head_dim + j * head_dim / 2 + i),
                                dtype_row_bytes(a.dtype, a.cols())),
                    0)
              << gguf_name << " head " << h << " pair " << i;
  }

  const auto norm = values(*gg.at("output_norm.weight"));
  for (float v : norm) EXPECT_EQ(v, 1.0f);
  const auto embd = values(*gg.at("token_embd.weight"));
  double sum = 0, sq = 0;
  for (float v : embd) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(embd.size());
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(embd.size()) - mean * mean), 0.02, 2e-3);
}

TEST_F(MakeModel, QuantizedGgufStaysCloseToF32) {
  ASSERT_EQ(run("--shape tiny --dtype f32 --format gguf --seed 3 --out " + path("f32.gguf")), 0) << log();
  const GgufFile ref = read_gguf(path("f32.gguf"));
  const auto want = index(ref.tensors);
  for (const auto& [dtype, name, tolerance] :
       {std::tuple<DType, std::string, float>{DType::Q8_0, "q8_0", 1e-3f}, {DType::Q4_0, "q4_0", 1e-2f},
        {DType::F16, "f16", 1e-4f}, {DType::BF16, "bf16", 5e-4f}}) {
    const std::string file = path(name + ".gguf");
    ASSERT_EQ(run("--shape tiny --dtype " + name + " --format gguf --seed 3 --out " + file), 0) << log();
    const GgufFile g = read_gguf(file);
    ASSERT_EQ(g.tensors.size(), ref.tensors.size());
    for (const auto& t : g.tensors) {
      const bool norm = t.name.find("norm") != std::string::npos;
      // Q8_0 / Q4_0 need rows of whole 32-blocks; ffn_down's 172 columns fall back to F16.
      const bool fallback = dtype_is_quantized(dtype) && t.name.find("ffn_down") != std::string::npos;
      EXPECT_EQ(t.dtype, norm ? DType::F32 : fallback ? DType::F16 : dtype) << name << " " << t.name;
      const auto got = values(t), exact = values(*want.at(t.name));
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - exact[i]));
      EXPECT_LT(worst, tolerance) << name << " " << t.name;
    }
  }
}

// The other block types: in the tiny shape (64-wide rows, ffn_down 172) the 256-weight types
// fall back as llama.cpp's quantizer does, and what fits nothing becomes F16; a 256-wide
// shape keeps them. Tolerances: a few quantization steps of these 0.02-scale weights.
TEST_F(MakeModel, EveryBlockTypeWithLlamaCppFallbacks) {
  struct Case {
    const char* name;
    DType type, tiny_fallback;
    float tolerance;
  };
  const Case cases[] = {{"q4_1", DType::Q4_1, DType::Q4_1, 1e-2f},    {"q5_0", DType::Q5_0, DType::Q5_0, 5e-3f},
                        {"q5_1", DType::Q5_1, DType::Q5_1, 5e-3f},    {"q2_k", DType::Q2_K, DType::IQ4_NL, 4e-2f},
                        {"q3_k", DType::Q3_K, DType::IQ4_NL, 2e-2f},  {"q4_k", DType::Q4_K, DType::Q5_0, 1e-2f},
                        {"q5_k", DType::Q5_K, DType::Q5_1, 5e-3f},    {"q6_k", DType::Q6_K, DType::Q8_0, 3e-3f},
                        {"iq4_nl", DType::IQ4_NL, DType::IQ4_NL, 1e-2f}, {"iq4_xs", DType::IQ4_XS, DType::IQ4_NL, 1e-2f}};
  const std::string wide = "--dim 256 --hidden 512 --heads 4 --kv-heads 2 --seed 3 --format gguf";
  ASSERT_EQ(run("--shape tiny --dtype f32 --format gguf --seed 3 --out " + path("tiny.gguf")), 0) << log();
  ASSERT_EQ(run("--shape tiny --dtype f32 " + wide + " --out " + path("wide.gguf")), 0) << log();
  const GgufFile tiny_ref = read_gguf(path("tiny.gguf")), wide_ref = read_gguf(path("wide.gguf"));
  for (const auto& c : cases) {
    for (const bool is_wide : {false, true}) {
      const std::string file = path(std::string(c.name) + (is_wide ? "-wide" : "") + ".gguf");
      ASSERT_EQ(run("--shape tiny --dtype " + std::string(c.name) + " " +
                    (is_wide ? wide : std::string("--format gguf --seed 3")) + " --out " + file),
                0)
          << log();
      const GgufFile g = read_gguf(file);
      const auto want = index(is_wide ? wide_ref.tensors : tiny_ref.tensors);
      for (const auto& t : g.tensors) {
        const bool norm = t.name.find("norm") != std::string::npos;
        const bool down = t.name.find("ffn_down") != std::string::npos;
        const DType expect = norm ? DType::F32 : is_wide ? c.type : down ? DType::F16 : c.tiny_fallback;
        EXPECT_EQ(t.dtype, expect) << c.name << " " << t.name;
        const auto got = values(t), exact = values(*want.at(t.name));
        float worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - exact[i]));
        EXPECT_LT(worst, c.tolerance) << c.name << " " << t.name;
      }
    }
  }
}

TEST_F(MakeModel, SafetensorsDtypesOverridesAndTying) {
  ASSERT_EQ(run("--shape tiny --dtype bf16 --format safetensors --layers 1 --vocab 100 --tied --out " + path("hf")), 0)
      << log();
  std::ifstream config_in(path("hf") + "/config.json");
  const auto config = nlohmann::json::parse(config_in);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["num_hidden_layers"], 1);
  EXPECT_EQ(config["vocab_size"], 100);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  const auto files = read_safetensors_dir(path("hf"));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].tensors.size(), 11u);  // embedding, 9 per layer, final norm; tied: no lm_head
  for (const auto& t : files[0].tensors) EXPECT_EQ(t.dtype, DType::BF16) << t.name;
  EXPECT_EQ(index(files[0].tensors).at("model.embed_tokens.weight")->shape, (std::vector<int64_t>{100, 64}));

  ASSERT_EQ(run("--shape tiny --dtype f16 --format gguf --heads 4 --kv-heads 2 --dim 128 --hidden 256 --out " +
                path("t.gguf")),
            0)
      << log();
  const GgufFile g = read_gguf(path("t.gguf"));
  EXPECT_EQ(g.metadata.get_int("llama.rope.dimension_count"), 32);
  EXPECT_EQ(index(g.tensors).at("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{64, 128}));
}

TEST_F(MakeModel, WeightsDependOnTheSeedOnly) {
  const auto bytes = [&](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  ASSERT_EQ(run("--dtype q4_0 --format gguf --seed 5 --threads 1 --out " + path("a.gguf")), 0) << log();
  ASSERT_EQ(run("--dtype q4_0 --format gguf --seed 5 --threads 2 --out " + path("b.gguf")), 0) << log();
  ASSERT_EQ(run("--dtype q4_0 --format gguf --seed 6 --out " + path("c.gguf")), 0) << log();
  EXPECT_EQ(bytes(path("a.gguf")), bytes(path("b.gguf")));
  EXPECT_NE(bytes(path("a.gguf")), bytes(path("c.gguf")));
}

// --experts writes Mixtral's GGUF layout: a router kept F32 and each projection's experts
// stacked, in the asked type; the file loads as a MoE model.
TEST_F(MakeModel, ExpertsAreStackedAsLlamaCppWritesMixtral) {
  ASSERT_EQ(run("--shape tiny --hidden 64 --experts 4 --experts-used 2 --dtype q8_0 --format gguf --out " +
                path("moe.gguf")),
            0)
      << log();
  const GgufFile g = read_gguf(path("moe.gguf"));
  EXPECT_EQ(g.metadata.get_int("llama.expert_count"), 4);
  EXPECT_EQ(g.metadata.get_int("llama.expert_used_count"), 2);
  const auto gg = index(g.tensors);
  EXPECT_EQ(gg.at("blk.1.ffn_gate_inp.weight")->dtype, DType::F32);
  EXPECT_EQ(gg.at("blk.1.ffn_gate_inp.weight")->shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(gg.at("blk.1.ffn_up_exps.weight")->shape, (std::vector<int64_t>{4, 64, 64}));
  EXPECT_EQ(gg.at("blk.1.ffn_down_exps.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(gg.count("blk.1.ffn_up.weight"), 0u);
  auto model = Model::load(path("moe.gguf"));
  EXPECT_EQ(model->config().num_experts, 4);
  EXPECT_EQ(model->layer(1).experts.down.size(), 4u);
  EXPECT_NE(run("--shape tiny --experts 4 --dtype f32 --format gguf --out " + path("no-used.gguf")), 0);
  EXPECT_NE(run("--shape tiny --experts 4 --experts-used 2 --dtype f32 --format safetensors --out " + path("hf")), 0);
  EXPECT_NE(log().find("GGUF only"), std::string::npos) << log();
}

TEST_F(MakeModel, BadArgumentsFailWithOneLine) {
  const std::string out = " --out " + path("x");
  for (const std::string& args :
       {std::string("--dtype q4_0 --format safetensors") + out, std::string("--dtype f16 --format gguf"),
        std::string("--dtype f16 --format onnx") + out, std::string("--dtype f64 --format gguf") + out,
        std::string("--shape huge --dtype f16 --format gguf") + out,
        std::string("--dtype f16 --format gguf --heads 7") + out,
        std::string("--dtype f16 --format gguf --heads 8 --kv-heads 3") + out,
        std::string("--dtype f16 --format gguf --layers 0") + out,
        std::string("--dtype f16 --format gguf --dim 48 --heads 16") + out,
        std::string("--dtype f16 --format gguf --bogus 1") + out}) {
    EXPECT_NE(run(args), 0) << args;
    const std::string text = log();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << args << ": " << text;
    EXPECT_EQ(text.rfind("orzo-make-model: ", 0), 0u) << args << ": " << text;
  }
  EXPECT_NE(run("--dtype f16 --format gguf --out " + path("no/such/dir/x.gguf")), 0);
}

}  // namespace
}  // namespace orzo
