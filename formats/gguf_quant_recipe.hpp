#pragma once
// Which type each tensor of a GGUF model is stored as when quantizing to a named target:
// one plain type (f32 ... iq4_xs) or one of llama.cpp's mixes (Q4_K_M, Q5_K_M, Q4_K_S,
// Q5_K_S, Q3_K_M, Q6_K, Q8_0), whose per-tensor rules are llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp) for the tensors of the llama/qwen decoders.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace orzo {

struct QuantTarget {
  std::string name;    // as the user spells it: "q4_k", "Q4_K_M"
  DType base;          // the type of the bulk of the matrices
  bool mix = false;    // llama.cpp's per-tensor rules apply, and rows that do not fit fall back
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_*, written as general.file_type
};

// Case-insensitive; nullopt for an unknown name.
std::optional<QuantTarget> parse_quant_target(const std::string& name);
// Every name parse_quant_target accepts, in its canonical spelling.
std::vector<std::string> quant_target_names();

// llama.cpp's LLAMA_FTYPE_* of a model that is "mostly" t (the plain K types count as
// their _S mixes).
uint32_t llama_file_type(DType t);

// The type llama.cpp stores a matrix as when rows of `cols` do not split into t's blocks:
// the 256-weight types fall back to a 32-weight type of about the same size (Q2_K, Q3_K,
// IQ4_XS to IQ4_NL; Q4_K to Q5_0; Q5_K to Q5_1; Q6_K to Q8_0), and what still does not fit
// to F16. t itself when the rows fit.
DType fallback_type(DType t, int64_t cols);

struct RecipeTensor {
  std::string name;             // GGUF name: token_embd.weight, blk.3.attn_v.weight, ...
  std::vector<int64_t> shape;   // outermost first
};

// The type of `tensor` under `target` in a model of `layers` blocks; `has_output`: the model
// has its own output.weight (otherwise token_embd doubles as the LM head and is treated as
// it). Vectors (norms, biases, rope_freqs) stay F32. A plain target stores every matrix as
// its type and throws std::invalid_argument naming the tensor when its rows do not fit.
DType recipe_type(const QuantTarget& target, const RecipeTensor& tensor, int64_t layers, bool has_output);

}  // namespace orzo
