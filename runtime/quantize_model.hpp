#pragma once
// Re-encoding a whole model as one GGUF file: `orzo quantize`. The input is an HF
// directory (config.json + safetensors, laid out as llama.cpp's converter does: GGUF names,
// Llama q/k rows permuted for interleaved RoPE, Llama 3 scaling as rope_freqs, the experts of
// a Mixture-of-Experts model stacked per projection) or a GGUF
// file (every metadata key copied). Each tensor's type comes from the target's recipe
// (formats/gguf_quant_recipe.hpp); every row is decoded to f32 and encoded again.
#include <cstddef>
#include <functional>
#include <string>

#include "formats/gguf_quant_recipe.hpp"

namespace orzo {

class GgufWriter;

struct QuantizeProgress {
  size_t tensor = 0, tensors = 0;         // the tensor just written (1-based) of how many
  std::string name;                       // its GGUF name
  DType type = DType::F32;                // as written
  size_t bytes_done = 0, bytes_total = 0;  // input weights read so far, of all
};

struct QuantizeOptions {
  int threads = 0;  // <= 0: one per hardware thread
  std::function<void(const QuantizeProgress&)> on_tensor;
  // For an HF input: writes the tokenizer.* keys of the directory's tokenizer files (the
  // tokenizers are text/'s, which runtime/ does not include).
  std::function<void(GgufWriter&, const std::string& dir)> hf_tokenizer;
};

// Writes `out` (created or truncated; on an exception it is left incomplete, so the caller
// writes to a temporary name). Throws LoadError for an unreadable or unsupported input and
// std::invalid_argument for a tensor the target cannot store.
void quantize_model(const std::string& in, const std::string& out, const QuantTarget& target,
                    const QuantizeOptions& options = {});

}  // namespace orzo
