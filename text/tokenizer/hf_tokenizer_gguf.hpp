#pragma once
// An HF directory's tokenizer.json as llama.cpp's tokenizer.ggml.* keys, for `orzo
// quantize` of an HF checkpoint: byte-level BPE (Llama 3, Qwen, GPT-2 splits) becomes a
// "gpt2" vocabulary with its merges; SentencePiece-style BPE with byte fallback (Llama 2,
// Mistral) becomes a "llama" vocabulary whose scores rank the pieces in id order, which is
// how SentencePiece's BPE orders its merges. Tokenizer::from_gguf reads both back.
#include <string>

namespace orzo {

class GgufWriter;

// Writes the keys and returns "" or, when the directory's tokenizer cannot be written as
// GGUF keys (none there, another model type, an unknown split), writes nothing and says why.
std::string write_hf_tokenizer_gguf(GgufWriter& out, const std::string& dir);

}  // namespace orzo
