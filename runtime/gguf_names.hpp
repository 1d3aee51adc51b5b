#pragma once
// How llama.cpp's converter lays a Llama-family checkpoint out in GGUF: its tensor names
// (token_embd.weight, blk.N.attn_q.weight, ...) for the HF ones, and the row order of q/k.
#include <cstdint>
#include <optional>
#include <string>

namespace orzo {

// GGUF name -> HF name for a model of `arch` (ModelConfig::architecture: Gemma names its
// norms otherwise); a name outside the table is returned as it is.
std::string hf_name_of_gguf(const std::string& gguf_name, const std::string& arch);
// An HF name as orzo's loader knows it: Mixtral's block_sparse_moe.gate and its experts'
// w1/w3/w2 become mlp.gate and gate_proj/up_proj/down_proj (the names of Qwen's MoE models);
// any other name is returned as it is.
std::string canonical_hf_name(const std::string& hf_name);
// HF name -> GGUF name; nullopt for a tensor llama.cpp's layout has no place for.
std::optional<std::string> gguf_name_of_hf(const std::string& hf_name, const std::string& arch);

// llama.cpp permutes Llama q/k rows so that RoPE pairs are adjacent: within each head of
// head_dim rows, GGUF row 2i + j holds HF row j * head_dim / 2 + i. The HF row of GGUF row
// r of a [rows, ...] matrix of `heads` heads.
int64_t hf_row_of_interleaved(int64_t r, int64_t rows, int64_t heads);

}  // namespace orzo
