#include "formats/gguf_quant_recipe.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace orzo {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Named {
  const char* name;
  DType base;
  bool mix;
  uint32_t file_type;
};

// The LLAMA_FTYPE_MOSTLY_* numbers are llama.h's.
constexpr Named kTargets[] = {
    {"f32", DType::F32, false, 0},        {"f16", DType::F16, false, 1},         {"bf16", DType::BF16, false, 32},
    {"q8_0", DType::Q8_0, false, 7},      {"q4_0", DType::Q4_0, false, 2},       {"q4_1", DType::Q4_1, false, 3},
    {"q5_0", DType::Q5_0, false, 8},      {"q5_1", DType::Q5_1, false, 9},       {"q2_k", DType::Q2_K, false, 10},
    {"q3_k", DType::Q3_K, false, 11},     {"q4_k", DType::Q4_K, false, 14},      {"q5_k", DType::Q5_K, false, 16},
    {"q6_k", DType::Q6_K, false, 18},     {"iq4_nl", DType::IQ4_NL, false, 25},  {"iq4_xs", DType::IQ4_XS, false, 30},
    {"Q3_K_M", DType::Q3_K, true, 12},    {"Q4_K_S", DType::Q4_K, true, 14},     {"Q4_K_M", DType::Q4_K, true, 15},
    {"Q5_K_S", DType::Q5_K, true, 16},    {"Q5_K_M", DType::Q5_K, true, 17},     {"Q6_K", DType::Q6_K, true, 18},
    {"Q8_0", DType::Q8_0, true, 7},
};

// Layer index of a blk.N.* name; -1 for the global tensors.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const auto dot = name.find('.', 4);
  try {
    return std::stoll(name.substr(4, dot - 4));
  } catch (const std::exception&) {
    return -1;
  }
}

bool has_part(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third one
// between, get the larger type in the _M mixes.
bool use_more_bits(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// llama_tensor_get_type's rules for the mixes offered here, before the fallback for rows
// that do not fit. (Its Falcon and 70B special cases do not arise for these decoders; its
// 8-expert rules for Mixtral's attn_v and ffn_down are not followed: such a file gets the
// types a dense model would.)
DType mix_type(const QuantTarget& t, const RecipeTensor& tensor, int64_t layers, bool has_output) {
  const std::string& name = tensor.name;
  const bool is_output = name == "output.weight" || (!has_output && name == "token_embd.weight");
  if (is_output) {
    if (tensor.shape.back() % dtype_block_elems(t.base) != 0) return DType::Q8_0;
    return t.base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;
  }
  const int64_t layer = layer_of(name);
  const std::string& mix = t.name;
  if (has_part(name, "attn_v.weight")) {
    if ((mix == "Q4_K_M" || mix == "Q5_K_M") && use_more_bits(layer, layers)) return DType::Q6_K;
    if (mix == "Q4_K_S" && layer < 4) return DType::Q5_K;
    if (mix == "Q3_K_M") return layer < 2 ? DType::Q5_K : DType::Q4_K;
  } else if (has_part(name, "ffn_down")) {
    if (mix == "Q3_K_M") return layer < layers / 16 ? DType::Q5_K : DType::Q4_K;
    if ((mix == "Q4_K_M" || mix == "Q5_K_M") && use_more_bits(layer, layers)) return DType::Q6_K;
    if (mix == "Q4_K_S" && layer < layers / 8) return DType::Q5_K;
  } else if (has_part(name, "attn_output.weight")) {
    if (mix == "Q3_K_M") return DType::Q4_K;
  } else if (has_part(name, "attn_qkv.weight")) {  // Phi-3's fused q|k|v
    if (mix == "Q3_K_M") return DType::Q4_K;
    if (mix == "Q4_K_M") return DType::Q5_K;
    if (mix == "Q5_K_M") return DType::Q6_K;
  }
  return t.base;
}

}  // namespace

// An exact spelling first, so that "Q6_K" and "Q8_0" are the mixes; otherwise any case,
// the plain types first ("Q4_K" is q4_k, "q4_k_m" is Q4_K_M).
std::optional<QuantTarget> parse_quant_target(const std::string& name) {
  const auto target = [](const Named& n) { return QuantTarget{n.name, n.base, n.mix, n.file_type}; };
  for (const auto& n : kTargets)
    if (n.name == name) return target(n);
  for (const auto& n : kTargets)
    if (lower(n.name) == lower(name)) return target(n);
  return std::nullopt;
}

std::vector<std::string> quant_target_names() {
  std::vector<std::string> out;
  for (const auto& n : kTargets) out.emplace_back(n.name);
  return out;
}

uint32_t llama_file_type(DType t) {
  for (const auto& n : kTargets)
    if (!n.mix && n.base == t) return n.file_type;
  return 0;
}

DType fallback_type(DType t, int64_t cols) {
  if (cols % dtype_block_elems(t) == 0) return t;
  DType smaller = DType::F16;
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS: smaller = DType::IQ4_NL; break;
    case DType::Q4_K: smaller = DType::Q5_0; break;
    case DType::Q5_K: smaller = DType::Q5_1; break;
    case DType::Q6_K: smaller = DType::Q8_0; break;
    default: break;
  }
  return cols % dtype_block_elems(smaller) == 0 ? smaller : DType::F16;
}

DType recipe_type(const QuantTarget& target, const RecipeTensor& tensor, int64_t layers, bool has_output) {
  // A MoE router is small and decides which experts run: llama.cpp never quantizes it.
  if (tensor.shape.size() < 2 || has_part(tensor.name, "ffn_gate_inp")) return DType::F32;
  const int64_t cols = tensor.shape.back();
  if (target.mix) return fallback_type(mix_type(target, tensor, layers, has_output), cols);
  if (cols % dtype_block_elems(target.base) != 0)
    throw std::invalid_argument("tensor " + tensor.name + ": rows of " + std::to_string(cols) + " do not split into " +
                                dtype_name(target.base) + "'s blocks of " +
                                std::to_string(dtype_block_elems(target.base)) +
                                " (a mix such as Q4_K_M falls back per tensor as llama.cpp does)");
  return target.base;
}

}  // namespace orzo
