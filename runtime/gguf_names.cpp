#include "runtime/gguf_names.hpp"

#include <utility>

namespace orzo {
namespace {

const std::pair<const char*, const char*> kGlobals[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// blk.N.<gguf> <-> model.layers.N.<hf>, each followed by .weight or .bias.
const std::pair<const char*, const char*> kPerLayer[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},           {"ffn_down", "mlp.down_proj"},
    // Mixture of Experts: the router, every expert's matrix stacked into one [experts, rows,
    // cols] tensor (HF stores one per expert: mlp.experts.E.gate_proj), Qwen2-MoE's shared one.
    {"ffn_gate_inp", "mlp.gate"},        {"ffn_gate_exps", "mlp.experts.gate_proj"},
    {"ffn_up_exps", "mlp.experts.up_proj"}, {"ffn_down_exps", "mlp.experts.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"}, {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
};

// Mixtral names the experts' gate, up and down projections w1, w3 and w2.
const std::pair<const char*, const char*> kMixtralExpertMatrices[] = {
    {".w1.", ".gate_proj."}, {".w3.", ".up_proj."}, {".w2.", ".down_proj."}};

// Gemma's sandwich norms: there post_attention_layernorm normalizes the attention's output,
// and the FFN's input norm is pre_feedforward_layernorm. Read before kPerLayer.
const std::pair<const char*, const char*> kGemmaPerLayer[] = {
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};

// Phi-3's fused projections: q|k|v in one matrix, and ffn_up holding gate then up (2 x inter rows).
const std::pair<const char*, const char*> kPhi3PerLayer[] = {
    {"attn_qkv", "self_attn.qkv_proj"},
    {"ffn_up", "mlp.gate_up_proj"},
};

bool is_gemma(const std::string& arch) { return arch == "gemma2" || arch == "gemma3"; }

struct LayerName {
  std::string layer, part, kind;  // "3", "attn_q" or "self_attn.q_proj", "weight"
};

// prefix N.part.kind -> its pieces; nullopt when the name does not have that form.
std::optional<LayerName> split_layer_name(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const auto dot1 = name.find('.', prefix.size());
  const auto dot_last = name.rfind('.');
  if (dot1 == std::string::npos || dot_last <= dot1) return std::nullopt;
  return LayerName{name.substr(prefix.size(), dot1 - prefix.size()), name.substr(dot1 + 1, dot_last - dot1 - 1),
                   name.substr(dot_last + 1)};
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  if (const auto at = s.find(from); at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

std::string canonical_hf_name(const std::string& name) {
  std::string n = replace_once(name, "block_sparse_moe.gate.", "mlp.gate.");
  if (n.find("block_sparse_moe.experts.") == std::string::npos) return n;
  n = replace_once(n, "block_sparse_moe.experts.", "mlp.experts.");
  for (const auto& [w, proj] : kMixtralExpertMatrices) n = replace_once(n, w, proj);
  return n;
}

std::string hf_name_of_gguf(const std::string& name, const std::string& arch) {
  for (const auto& [gguf, hf] : kGlobals)
    if (name == gguf) return hf;
  const auto n = split_layer_name(name, "blk.");
  if (!n) return name;
  if (is_gemma(arch))
    for (const auto& [gguf, hf] : kGemmaPerLayer)
      if (n->part == gguf) return "model.layers." + n->layer + "." + hf + "." + n->kind;
  if (arch == "phi3")
    for (const auto& [gguf, hf] : kPhi3PerLayer)
      if (n->part == gguf) return "model.layers." + n->layer + "." + hf + "." + n->kind;
  for (const auto& [gguf, hf] : kPerLayer)
    if (n->part == gguf) return "model.layers." + n->layer + "." + hf + "." + n->kind;
  return name;
}

std::optional<std::string> gguf_name_of_hf(const std::string& name, const std::string& arch) {
  for (const auto& [gguf, hf] : kGlobals)
    if (name == hf) return std::string(gguf);
  const auto n = split_layer_name(name, "model.layers.");
  if (!n) return std::nullopt;
  if (is_gemma(arch))
    for (const auto& [gguf, hf] : kGemmaPerLayer)
      if (n->part == hf) return "blk." + n->layer + "." + gguf + "." + n->kind;
  if (arch == "phi3")
    for (const auto& [gguf, hf] : kPhi3PerLayer)
      if (n->part == hf) return "blk." + n->layer + "." + gguf + "." + n->kind;
  for (const auto& [gguf, hf] : kPerLayer)
    if (n->part == hf) return "blk." + n->layer + "." + gguf + "." + n->kind;
  return std::nullopt;
}

int64_t hf_row_of_interleaved(int64_t r, int64_t rows, int64_t heads) {
  const int64_t head_dim = rows / heads, local = r % head_dim;
  return r - local + (local % 2) * (head_dim / 2) + local / 2;
}

}  // namespace orzo
