#pragma once
// What a model file says about itself, for `orzo info`: its shape, the element types of its
// tensors, its tokenizer. Read from the GGUF header or the HF directory's config.json,
// safetensors headers and tokenizer files; no weight is read, so a large file is described
// at once. A model orzo cannot run is still described from the keys it states.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace orzo::cli {

struct TensorTypeUse {
  std::string type;  // lower case, as gguf-dump writes it: q4_1, f32
  int64_t count = 0;
  uint64_t bytes = 0;
};

struct SpecialToken {
  int64_t id = 0;
  std::string text;  // empty when the id lies outside the vocabulary
};

struct TokenizerInfo {
  std::string kind;  // GGUF tokenizer.ggml.model (llama, gpt2); HF tokenizer.json's model type (BPE)
  std::string pre;   // GGUF tokenizer.ggml.pre
  std::optional<int64_t> vocab_size;
  std::optional<SpecialToken> bos, eos, pad, unk;
  std::string chat_template;
  // HF only, where the loader resolves the special tokens: why it refused the files. A GGUF
  // tokenizer is shown as its metadata stores it, which needs no loader.
  std::string unreadable;
};

struct ModelInfo {
  std::string path;
  std::string format;     // "gguf" or "hf"
  uint32_t gguf_version = 0;
  std::string name;       // GGUF general.name
  std::string architecture;  // GGUF general.architecture; HF architectures[0]
  std::string model_type;    // HF only
  std::string not_runnable;  // why orzo cannot run it; empty when it can

  // The shape; nullopt where the file does not state it.
  std::optional<int64_t> layers, hidden_size, ffn_size, heads, kv_heads, head_dim, vocab_size, context_length;
  std::optional<double> rope_theta, norm_eps;
  std::string rope_scaling;  // "none", "linear", "llama3", or as the file names it
  std::optional<double> rope_scaling_factor;
  std::optional<int64_t> rope_original_context;  // runnable LongRope models: the context it extends
  std::optional<int64_t> rotary_dim;             // runnable models that rotate part of each head only
  std::optional<int64_t> sliding_window;  // runnable models only: the window, on how many layers
  int64_t sliding_layers = 0;
  std::optional<double> local_rope_theta;  // Gemma 3's sliding layers' RoPE base
  // Runnable MoE models only: experts per layer, how many a token takes, their FFN width, the
  // shared expert's (0: none) and how many layers have them.
  int64_t experts = 0, experts_per_token = 0, expert_ffn_size = 0, shared_expert_ffn_size = 0, expert_layers = 0;
  std::optional<bool> tied_embeddings;

  int64_t parameters = 0;  // elements of every tensor
  int64_t tensors = 0;
  std::vector<TensorTypeUse> tensor_types;  // most bytes first
  uint64_t file_bytes = 0;                  // the GGUF file, or the HF directory's safetensors files

  std::optional<TokenizerInfo> tokenizer;  // nullopt: the model has none
};

// Throws LoadError (or std::invalid_argument for a missing path) naming what is wrong.
ModelInfo describe_model(const std::string& path);

}  // namespace orzo::cli
