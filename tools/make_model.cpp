// orzo-make-model: writes a Llama model with random weights, as an HF directory
// (config.json + model.safetensors) or as one GGUF file, for load and throughput tests of
// real-sized models without downloading any. With --experts its FFNs are a Mixture of
// Experts, written as llama.cpp writes Mixtral (GGUF only): a router and each projection's
// experts stacked in one tensor.
//
// Every weight is a pure function of (seed, HF tensor name, element index), so a model is
// the same whatever the thread count, and the two formats hold the same model: the GGUF
// attn_q / attn_k rows are the HF rows permuted to llama.cpp's interleaved-RoPE order, as
// llama.cpp's converter does. Matrices whose rows do not split into the type's blocks (the
// tiny shape's ffn_down, or any row under 256 for the K-quants) fall back as llama.cpp's
// quantizer does (formats/gguf_quant_recipe.hpp: Q4_K to Q5_0, ..., else F16); norms are
// F32 in GGUF.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "formats/gguf_quant_recipe.hpp"
#include "formats/gguf_writer.hpp"
#include "formats/safetensors_writer.hpp"
#include "kernels/cpu/convert.hpp"
#include "runtime/gguf_names.hpp"

namespace orzo {
namespace {

struct Shape {
  int64_t dim, hidden, layers, heads, kv_heads, vocab;
  bool tied;
  int64_t experts = 0, experts_used = 0;  // hidden is then each expert's FFN width
  int64_t head_dim() const { return dim / heads; }
};

const std::map<std::string, Shape> kShapes = {
    {"llama-3.2-1b", {2048, 8192, 16, 32, 8, 128256, true}},
    {"small", {1024, 2816, 8, 16, 4, 32000, false}},
    {"tiny", {64, 172, 2, 8, 4, 512, false}},
    // Qwen3-30B-A3B's experts (128, 8 per token, FFN 3/8 of the width) at half its width and
    // a sixth of its depth, so that it fits a small machine.
    {"moe-small", {1024, 384, 8, 16, 4, 32000, false, 128, 8}},
};

// Every type, by the lower-case name orzo quantize also takes.
std::map<std::string, DType> dtypes_by_name() {
  std::map<std::string, DType> m;
  for (DType t : kAllDTypes) {
    std::string name = dtype_name(t);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    m[name] = t;
  }
  return m;
}

constexpr float kWeightStd = 0.02f;
constexpr size_t kChunkBytes = 32u << 20;  // generated, then written, this much at a time

struct Weight {
  std::string hf_name, gguf_name;
  std::vector<int64_t> shape;  // [rows, cols], or [experts, rows, cols]
  bool norm = false;
  int64_t rope_heads = 0;  // > 0: GGUF rows are permuted per head for interleaved RoPE
};

std::vector<Weight> weights_of(const Shape& s) {
  const int64_t q_rows = s.heads * s.head_dim(), kv_rows = s.kv_heads * s.head_dim();
  std::vector<Weight> w;
  w.push_back({"model.embed_tokens.weight", "token_embd.weight", {s.vocab, s.dim}});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", gg = "blk." + std::to_string(l) + ".";
    w.push_back({hf + "input_layernorm.weight", gg + "attn_norm.weight", {s.dim}, true});
    w.push_back({hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q_rows, s.dim}, false, s.heads});
    w.push_back({hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv_rows, s.dim}, false, s.kv_heads});
    w.push_back({hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv_rows, s.dim}});
    w.push_back({hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {s.dim, q_rows}});
    w.push_back({hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {s.dim}, true});
    if (s.experts > 0) {
      w.push_back({hf + "mlp.gate.weight", gg + "ffn_gate_inp.weight", {s.experts, s.dim}});
      w.push_back({hf + "mlp.experts.gate_proj.weight", gg + "ffn_gate_exps.weight", {s.experts, s.hidden, s.dim}});
      w.push_back({hf + "mlp.experts.up_proj.weight", gg + "ffn_up_exps.weight", {s.experts, s.hidden, s.dim}});
      w.push_back({hf + "mlp.experts.down_proj.weight", gg + "ffn_down_exps.weight", {s.experts, s.dim, s.hidden}});
      continue;
    }
    w.push_back({hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {s.hidden, s.dim}});
    w.push_back({hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {s.hidden, s.dim}});
    w.push_back({hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {s.dim, s.hidden}});
  }
  w.push_back({"model.norm.weight", "output_norm.weight", {s.dim}, true});
  if (!s.tied) w.push_back({"lm_head.weight", "output.weight", {s.vocab, s.dim}});
  return w;
}

uint64_t mix64(uint64_t z) {  // SplitMix64's finalizer: a bijection that scatters every input bit
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_key(uint64_t seed, const std::string& name) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull);
  for (unsigned char c : name) h = mix64(h ^ c);
  return h;
}

// The sum of four 16-bit uniforms (Irwin-Hall, n = 4) rescaled to mean 0 and the target
// standard deviation: bell-shaped and bounded, which is all random weights need, at the cost
// of one hash per element.
void fill_row(uint64_t key, uint64_t first_index, float* out, int64_t n) {
  constexpr float kScale = kWeightStd * 1.7320508f / 65536.0f;  // sqrt(3): unit variance
  for (int64_t c = 0; c < n; ++c) {
    const uint64_t h = mix64(key + (first_index + static_cast<uint64_t>(c)) * 0x9e3779b97f4a7c15ull);
    const auto sum = static_cast<float>((h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48));
    out[c] = (sum - 2.0f * 65535.0f) * kScale;
  }
}

template <typename Writer>
void write_data(Writer& out, ThreadPool& pool, const Weight& w, DType dtype, uint64_t seed, bool permute) {
  const int64_t cols = w.shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < w.shape.size(); ++i) rows *= w.shape[i];
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  const int64_t rows_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / row_bytes));
  const uint64_t key = name_key(seed, w.hf_name);
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(rows, rows_per_chunk)) * row_bytes);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()), std::vector<float>(cols));
  for (int64_t first = 0; first < rows; first += rows_per_chunk) {
    const int64_t n = std::min(rows_per_chunk, rows - first);
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
      float* row = scratch[static_cast<size_t>(thread)].data();
      for (int64_t r = begin; r < end; ++r) {
        const int64_t src = permute && w.rope_heads > 0 ? hf_row_of_interleaved(first + r, rows, w.rope_heads) : first + r;
        if (w.norm)
          std::fill(row, row + cols, 1.0f);
        else
          fill_row(key, static_cast<uint64_t>(src * cols), row, cols);
        cpu::quantize_row(dtype, row, cols, chunk.data() + static_cast<size_t>(r) * row_bytes);
      }
    });
    out.write_tensor_data(chunk.data(), static_cast<size_t>(n) * row_bytes);
  }
}

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default: return "float32";
  }
}

uint64_t write_safetensors_model(const std::string& dir, const Shape& s, DType dtype, uint64_t seed, ThreadPool& pool) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const nlohmann::ordered_json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", s.dim},
      {"intermediate_size", s.hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", s.head_dim()},
      {"vocab_size", s.vocab},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 500000.0},
      {"max_position_embeddings", 8192},
      {"tie_word_embeddings", s.tied},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", torch_dtype(dtype)},
  };
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::ofstream config_file(config_path);
  config_file << config.dump(2) << "\n";
  if (!config_file.flush()) throw std::runtime_error(config_path + ": cannot write");

  const std::string path = (fs::path(dir) / "model.safetensors").string();
  SafetensorsWriter out(path);
  out.add_metadata("format", "pt");
  const auto weights = weights_of(s);
  for (const auto& w : weights) out.add_tensor(w.hf_name, dtype, w.shape);
  for (const auto& w : weights) write_data(out, pool, w, dtype, seed, false);
  out.finish();
  return fs::file_size(path);
}

// A vocabulary of our own, so that a generated model runs end to end with no files from
// anywhere else: SentencePiece-style with <unk>, <s>, </s>, the 256 byte pieces (every text
// encodes, byte by byte) and unused ids up to the vocabulary size. Token types follow
// llama.cpp: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte.
void write_byte_tokenizer(GgufWriter& out, int64_t vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  char piece[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    tokens.emplace_back(piece);
    types.push_back(6);
  }
  while (static_cast<int64_t>(tokens.size()) < vocab) {
    tokens.push_back("<unused" + std::to_string(tokens.size()) + ">");
    types.push_back(5);
  }
  out.add_string("tokenizer.ggml.model", "llama");
  out.add_string_array("tokenizer.ggml.tokens", tokens);
  out.add_f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  out.add_i32_array("tokenizer.ggml.token_type", types);
  out.add_u32("tokenizer.ggml.unknown_token_id", 0);
  out.add_bool("tokenizer.ggml.add_bos_token", true);
}

uint64_t write_gguf_model(const std::string& path, const std::string& shape_name, const Shape& s, DType dtype,
                          uint64_t seed, ThreadPool& pool) {
  GgufWriter out(path);
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  out.add_string("general.architecture", "llama");
  out.add_string("general.name", "orzo random " + shape_name);
  out.add_u32("general.file_type", llama_file_type(dtype));
  if (dtype_is_quantized(dtype)) out.add_u32("general.quantization_version", 2);
  out.add_u32("llama.context_length", 8192);
  out.add_u32("llama.embedding_length", u32(s.dim));
  out.add_u32("llama.feed_forward_length", u32(s.hidden));
  out.add_u32("llama.block_count", u32(s.layers));
  out.add_u32("llama.attention.head_count", u32(s.heads));
  out.add_u32("llama.attention.head_count_kv", u32(s.kv_heads));
  out.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  out.add_f32("llama.rope.freq_base", 500000.0f);
  out.add_u32("llama.rope.dimension_count", u32(s.head_dim()));
  out.add_u32("llama.vocab_size", u32(s.vocab));
  if (s.experts > 0) {
    out.add_u32("llama.expert_count", u32(s.experts));
    out.add_u32("llama.expert_used_count", u32(s.experts_used));
  }
  out.add_u32("tokenizer.ggml.bos_token_id", 1);
  out.add_u32("tokenizer.ggml.eos_token_id", 2);
  if (s.vocab >= 259) write_byte_tokenizer(out, s.vocab);

  const auto weights = weights_of(s);
  const auto type_of = [&](const Weight& w) {
    if (w.norm || w.gguf_name.find("ffn_gate_inp") != std::string::npos) return DType::F32;  // as llama.cpp keeps routers
    return fallback_type(dtype, w.shape.back());
  };
  for (const auto& w : weights) out.add_tensor(w.gguf_name, type_of(w), w.shape);
  for (const auto& w : weights) write_data(out, pool, w, type_of(w), seed, true);
  out.finish();
  return std::filesystem::file_size(path);
}

int run(int argc, char** argv) {
  CLI::App app("Writes a Llama model with random weights (HF safetensors directory or GGUF file).");
  std::string shape_name = "tiny", dtype_name_arg, format, out_path;
  uint64_t seed = 0;
  int threads = 0;
  bool tied = false;
  struct Override {
    const char* flag;
    const char* help;
    int64_t Shape::*field;
    int64_t value = 0;
    CLI::Option* option = nullptr;
  };
  Override overrides[] = {{"--dim", "Hidden size", &Shape::dim},
                          {"--hidden", "FFN intermediate size", &Shape::hidden},
                          {"--layers", "Number of layers", &Shape::layers},
                          {"--heads", "Attention heads", &Shape::heads},
                          {"--kv-heads", "Key/value heads", &Shape::kv_heads},
                          {"--vocab", "Vocabulary size", &Shape::vocab},
                          {"--experts", "Experts per layer (a Mixture of Experts; --hidden is then each one's width)",
                           &Shape::experts},
                          {"--experts-used", "Experts each token takes", &Shape::experts_used}};
  app.add_option("--shape", shape_name, "Base shape: llama-3.2-1b, small, tiny or moe-small")
      ->check(CLI::IsMember({"llama-3.2-1b", "small", "tiny", "moe-small"}))
      ->capture_default_str();
  for (auto& o : overrides) o.option = app.add_option(o.flag, o.value, o.help);
  auto* tied_flag = app.add_flag("--tied,!--untied", tied, "Share the embedding with the LM head (or not)");
  const auto dtypes = dtypes_by_name();
  std::vector<std::string> dtype_names;
  for (const auto& kv : dtypes) dtype_names.push_back(kv.first);
  app.add_option("--dtype", dtype_name_arg, "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k .. q6_k, iq4_nl or iq4_xs")
      ->required()
      ->check(CLI::IsMember(dtype_names));
  app.add_option("--format", format, "gguf (one file) or safetensors (an HF directory)")
      ->required()
      ->check(CLI::IsMember({"gguf", "safetensors"}));
  app.add_option("--out", out_path, "Output .gguf file or HF directory")->required();
  app.add_option("--seed", seed, "Weight seed")->capture_default_str();
  app.add_option("--threads", threads, "Generator threads (0: all)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "orzo-make-model: %s\n", e.what());
    return 2;
  }

  Shape s = kShapes.at(shape_name);
  for (const auto& o : overrides) {
    if (o.option->count() == 0) continue;
    if (o.value <= 0) throw std::invalid_argument(std::string(o.flag) + " must be positive");
    s.*o.field = o.value;
  }
  if (tied_flag->count() != 0) s.tied = tied;
  if (s.dim % s.heads != 0) throw std::invalid_argument("--dim must be a multiple of --heads");
  if (s.heads % s.kv_heads != 0) throw std::invalid_argument("--heads must be a multiple of --kv-heads");
  if (s.head_dim() % 2 != 0) throw std::invalid_argument("head_dim (dim / heads) must be even for RoPE");
  if (s.experts > 0 && (s.experts_used <= 0 || s.experts_used > s.experts))
    throw std::invalid_argument("--experts-used must be between 1 and --experts");
  const DType dtype = dtypes.at(dtype_name_arg);
  if (format == "safetensors" && dtype_is_quantized(dtype))
    throw std::invalid_argument("safetensors cannot hold " + dtype_name_arg + "; use --format gguf");
  if (format == "safetensors" && s.experts > 0) throw std::invalid_argument("experts are written as GGUF only");

  ThreadPool pool(threads);
  const auto start = std::chrono::steady_clock::now();
  const uint64_t bytes = format == "gguf" ? write_gguf_model(out_path, shape_name, s, dtype, seed, pool)
                                          : write_safetensors_model(out_path, s, dtype, seed, pool);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s %s, %.1f MB in %.1f s\n", out_path.c_str(), shape_name.c_str(), dtype_name_arg.c_str(),
              static_cast<double>(bytes) / 1e6, secs);
  return 0;
}

}  // namespace
}  // namespace orzo

int main(int argc, char** argv) {
  try {
    return orzo::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orzo-make-model: %s\n", e.what());
    return 1;
  }
}
