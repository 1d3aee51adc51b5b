#include "runtime/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/load_error.hpp"
#include "formats/gguf.hpp"

namespace orzo {

namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw LoadError(source + ": " + what);
}

int64_t get_int(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail(source, std::string("missing \"") + key + "\"");
  if (!it->is_number_integer()) fail(source, std::string("\"") + key + "\" is not an integer");
  return it->get<int64_t>();
}

int64_t get_int_or(const json& j, const char* key, int64_t fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return get_int(j, key, source);
}

double get_number_or(const json& j, const char* key, double fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(source, std::string("\"") + key + "\" is not a number");
  return it->get<double>();
}

bool get_bool_or(const json& j, const char* key, bool fallback, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(source, std::string("\"") + key + "\" is not a boolean");
  return it->get<bool>();
}

std::vector<double> get_numbers(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) fail(source, std::string("missing list \"") + key + "\"");
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number()) fail(source, std::string("\"") + key + "\" holds " + v.dump() + ", not a number");
    out.push_back(v.get<double>());
  }
  return out;
}

// eos_token_id may be one id or a list of them.
void add_token_ids(const json& j, const char* key, std::vector<int32_t>& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  auto add = [&](const json& v) {
    if (!v.is_number_integer()) fail(source, std::string("\"") + key + "\" holds a non-integer");
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    for (auto e : out)
      if (e == id) return;
    out.push_back(id);
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
}

// One RoPE parameter set ("rope_scaling"/"rope_parameters", or one of Gemma 3's per layer
// type) into `c`'s theta and scaling.
void read_rope_params(const json& params, ModelConfig& c, const std::string& source) {
  c.rope_theta = get_number_or(params, "rope_theta", c.rope_theta, source);
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = params.find(key);
    if (it != params.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  auto& s = c.rope_scaling;
  if (type == "default") return;
  s.factor = get_number_or(params, "factor", 1.0, source);
  // Phi3Config reads its older names ("su", and "yarn", which Phi-3 configs used for it) as longrope.
  if (type == "longrope" || (c.architecture == "phi3" && (type == "su" || type == "yarn"))) {
    s.type = RopeScaling::Type::LongRope;
    s.short_factor = get_numbers(params, "short_factor", source);
    s.long_factor = get_numbers(params, "long_factor", source);
    s.original_max_position = get_int_or(params, "original_max_position_embeddings", c.max_position, source);
  } else if (type == "linear") {
    s.type = RopeScaling::Type::Linear;
  } else if (type == "llama3") {
    s.type = RopeScaling::Type::Llama3;
    s.low_freq_factor = get_number_or(params, "low_freq_factor", 1.0, source);
    s.high_freq_factor = get_number_or(params, "high_freq_factor", 4.0, source);
    s.original_max_position = get_int(params, "original_max_position_embeddings", source);
  } else {
    fail(source, "unsupported rope scaling type \"" + type + "\" (supported: default, linear, llama3, longrope)");
  }
}

// partial_rotary_factor, in the rope parameters (transformers 5) or at the top level: RoPE
// turns int(head_dim * factor) dims of each head, as transformers truncates it.
void read_partial_rotary(const json& j, const json* params, ModelConfig& c, const std::string& source) {
  double factor = get_number_or(j, "partial_rotary_factor", 1.0, source);
  if (params) factor = get_number_or(*params, "partial_rotary_factor", factor, source);
  if (!(factor > 0 && factor <= 1)) fail(source, "partial_rotary_factor must be in (0, 1]");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
  if (c.rotary_dim == 0 && c.head_dim > 0) fail(source, "partial_rotary_factor leaves no dims of the head to rotate");
}

// What LongRope scales beyond its factors, as transformers' _compute_longrope_parameters: Phi-3
// keeps original_max_position_embeddings at the top level, which wins over the parameters';
// without a "factor" the context's growth max_position / original is the factor, and without
// an "attention_factor" cos and sin grow by sqrt(1 + ln factor / ln original).
void read_longrope_scale(const json& j, const json& params, ModelConfig& c, const std::string& source) {
  auto& s = c.rope_scaling;
  s.original_max_position = get_int_or(j, "original_max_position_embeddings", s.original_max_position, source);
  if (s.original_max_position <= 0) fail(source, "original_max_position_embeddings must be positive");
  s.factor = get_number_or(params, "factor",
                           static_cast<double>(c.max_position) / static_cast<double>(s.original_max_position), source);
  s.attention_factor = get_number_or(params, "attention_factor", longrope_attention_factor(s.factor, s.original_max_position),
                                     source);
}

// transformers < 5 writes "rope_scaling" (+ top-level "rope_theta"); 5.x writes
// "rope_parameters" with rope_theta inside, and for Gemma 3 one set per layer type. Accept
// every form.
void read_rope(const json& j, ModelConfig& c, const std::string& source) {
  c.rope_theta = get_number_or(j, "rope_theta", 10000.0, source);
  const json* params = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null()) {
      if (!it->is_object()) fail(source, std::string("\"") + key + "\" is not an object");
      params = &*it;
      break;
    }
  }
  if (c.architecture == "gemma3") c.rope_local_theta = get_number_or(j, "rope_local_base_freq", 10000.0, source);
  read_partial_rotary(j, params, c, source);
  if (!params) return;
  auto full = params->find("full_attention");
  if (full == params->end()) {
    read_rope_params(*params, c, source);
    if (c.rope_scaling.type == RopeScaling::Type::LongRope) read_longrope_scale(j, *params, c, source);
    return;
  }
  if (!full->is_object()) fail(source, "\"full_attention\" rope parameters are not an object");
  read_rope_params(*full, c, source);
  if (auto local = params->find("sliding_attention"); local != params->end() && local->is_object()) {
    ModelConfig sliding;
    read_rope_params(*local, sliding, source);
    if (sliding.rope_scaling.type != RopeScaling::Type::None)
      fail(source, "rope scaling on sliding-attention layers is not supported");
    c.rope_local_theta = sliding.rope_theta;
  }
}

// SmolLM3's layers without RoPE: no_rope_layers lists 1 for a layer that rotates, 0 for one
// that does not; older configs give only the interval (every interval-th layer has none).
void read_no_rope_layers(const json& j, ModelConfig& c, const std::string& source) {
  const auto layers = static_cast<size_t>(std::max<int64_t>(c.num_layers, 0));
  c.no_rope_layers.assign(layers, false);
  if (auto list = j.find("no_rope_layers"); list != j.end() && list->is_array()) {
    if (list->size() != layers)
      fail(source, "\"no_rope_layers\" lists " + std::to_string(list->size()) + " layers, not " + std::to_string(layers));
    for (size_t l = 0; l < layers; ++l) {
      const json& v = (*list)[l];
      if (!v.is_number_integer() || (v != 0 && v != 1)) fail(source, "\"no_rope_layers\" holds " + v.dump() + " (0 or 1)");
      c.no_rope_layers[l] = v == 0;
    }
    return;
  }
  const int64_t interval = get_int_or(j, "no_rope_layer_interval", 4, source);
  if (interval <= 0) fail(source, "no_rope_layer_interval must be positive");
  for (size_t l = 0; l < layers; ++l) c.no_rope_layers[l] = (static_cast<int64_t>(l) + 1) % interval == 0;
}

// Gemma 2/3's terms beyond a Llama's: the sandwich norms stored as (1 + w), GeGLU, the
// scaled embedding, query_pre_attn_scalar, soft caps, and which layers slide.
void read_gemma(const json& j, ModelConfig& c, const std::string& source) {
  c.sandwich_norms = true;
  c.norm_weight_offset = 1.0;
  c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
  c.qk_norm = c.architecture == "gemma3";
  c.attn_scale = 1.0 / std::sqrt(get_number_or(j, "query_pre_attn_scalar", static_cast<double>(c.head_dim), source));
  for (auto [key, cap] : {std::pair{"attn_logit_softcapping", &c.attn_softcap},
                          std::pair{"final_logit_softcapping", &c.final_softcap}})
    if (const double v = get_number_or(j, key, 0.0, source); v != 0.0) *cap = v;
  if (get_bool_or(j, "use_bidirectional_attention", false, source))
    fail(source, "use_bidirectional_attention (an embedding model) is not supported");
  const int64_t window = get_int_or(j, "sliding_window", 0, source);
  if (window <= 0) return;
  c.sliding_window = window;
  c.sliding_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  if (auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    if (static_cast<int64_t>(types->size()) != c.num_layers)
      fail(source, "\"layer_types\" lists " + std::to_string(types->size()) + " layers, not " + std::to_string(c.num_layers));
    for (size_t l = 0; l < types->size(); ++l) {
      const json& t = (*types)[l];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        fail(source, "\"layer_types\" holds " + t.dump() + " (supported: sliding_attention, full_attention)");
      c.sliding_layers[l] = t == "sliding_attention";
    }
    return;
  }
  // Older configs: Gemma 2 slides on even layers; Gemma 3 on all but every pattern-th.
  int64_t pattern = 2;
  if (c.architecture == "gemma3")
    pattern = get_int_or(j, "sliding_window_pattern", get_int_or(j, "_sliding_window_pattern", 6, source), source);
  if (pattern <= 0) fail(source, "sliding_window_pattern must be positive");
  for (int64_t l = 0; l < c.num_layers; ++l)
    c.sliding_layers[static_cast<size_t>(l)] = c.architecture == "gemma2" ? l % 2 == 0 : (l + 1) % pattern != 0;
}

// A per-layer list none of whose layers is marked says nothing: empty, as for a model without.
void forget_if_none(std::vector<bool>& layers) {
  if (std::find(layers.begin(), layers.end(), true) == layers.end()) layers.clear();
}

// Mixtral's, Qwen2-MoE's and Qwen3-MoE's experts. Mixtral's experts are intermediate_size
// wide and always renormalized; Qwen's are moe_intermediate_size wide, renormalized where
// norm_topk_prob, and some of their layers may keep a dense FFN.
void read_experts(const json& j, ModelConfig& c, const std::string& source) {
  const bool mixtral = c.architecture == "mixtral";
  // Mixtral's key; transformers 5 writes Qwen3-MoE's so too, where the Hub's configs say num_experts.
  c.num_experts = get_int(j, j.contains("num_local_experts") ? "num_local_experts" : "num_experts", source);
  c.experts_per_token = get_int(j, "num_experts_per_tok", source);
  c.expert_intermediate_size = mixtral ? c.intermediate_size : get_int(j, "moe_intermediate_size", source);
  c.norm_topk_prob = mixtral || get_bool_or(j, "norm_topk_prob", false, source);
  if (c.architecture == "qwen2moe") c.shared_expert_intermediate_size = get_int(j, "shared_expert_intermediate_size", source);
  if (mixtral) return;
  const int64_t step = get_int_or(j, "decoder_sparse_step", 1, source);
  if (step <= 0) fail(source, "decoder_sparse_step must be positive");
  c.dense_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t l = 0; l < c.num_layers; ++l) c.dense_layers[static_cast<size_t>(l)] = (l + 1) % step != 0;
  if (auto only = j.find("mlp_only_layers"); only != j.end() && only->is_array())
    for (const json& v : *only) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_layers)
        fail(source, "\"mlp_only_layers\" holds " + v.dump() + ", not a layer");
      c.dense_layers[v.get<size_t>()] = true;
    }
  forget_if_none(c.dense_layers);
}

void read_gguf_gemma(const GgufMetadata& m, const std::string& p, ModelConfig& c) {
  apply_gguf_gemma_rules(c);
  if (auto v = m.find_float(p + "attn_logit_softcapping"); v && *v != 0.0) c.attn_softcap = *v;
  if (auto v = m.find_float(p + "final_logit_softcapping"); v && *v != 0.0) c.final_softcap = *v;
  if (auto v = m.find_float(p + "rope.freq_base_swa"); v && c.architecture == "gemma3") c.rope_local_theta = *v;
}

// Experts as llama.cpp's loader reads them: a llama file with experts is a Mixtral; whether
// the chosen probabilities are renormalized is not a key but fixed (Qwen2-MoE no, Qwen3-MoE and
// Mixtral yes), unless the file says it. A layer without a router has a dense FFN (Qwen's
// mlp_only_layers), which llama.cpp does not allow but costs nothing to read.
void read_gguf_experts(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const GgufMetadata& m = file.metadata;
  const std::string& source = file.file->path();
  c.num_experts = m.find_int(p + "expert_count").value_or(0);
  if (c.num_experts == 0) {
    if (c.architecture == "qwen2moe" || c.architecture == "qwen3moe") fail(source, "missing " + p + "expert_count");
    return;
  }
  c.experts_per_token = m.get_int(p + "expert_used_count");
  c.expert_intermediate_size = m.find_int(p + "expert_feed_forward_length").value_or(c.intermediate_size);
  const std::string norm = p + "expert_weights_norm";
  c.norm_topk_prob = m.has(norm) ? m.get_bool(norm) : c.architecture != "qwen2moe";
  if (c.architecture == "qwen2moe")
    c.shared_expert_intermediate_size = m.find_int(p + "expert_shared_feed_forward_length").value_or(c.intermediate_size);
  c.dense_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string router = "blk." + std::to_string(l) + ".ffn_gate_inp.weight";
    c.dense_layers[static_cast<size_t>(l)] =
        std::none_of(file.tensors.begin(), file.tensors.end(), [&](const TensorView& t) { return t.name == router; });
  }
  forget_if_none(c.dense_layers);
}

// llama.cpp's Phi-3 GGUFs hold LongRope's factors as two F32 tensors of rope_dim / 2 (absent
// without scaling), beside keys for the original context and the attention factor.
void read_gguf_longrope(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const std::string& source = file.file->path();
  const TensorView *short_t = nullptr, *long_t = nullptr;
  for (const auto& t : file.tensors) {
    if (t.name == "rope_factors_short.weight") short_t = &t;
    if (t.name == "rope_factors_long.weight") long_t = &t;
  }
  if (!short_t && !long_t) return;
  if (!short_t || !long_t) fail(source, "rope_factors_short.weight and rope_factors_long.weight come as a pair");
  auto& s = c.rope_scaling;
  s.type = RopeScaling::Type::LongRope;
  for (auto [t, out] : {std::pair{short_t, &s.short_factor}, std::pair{long_t, &s.long_factor}}) {
    if (t->dtype != DType::F32 || t->shape.size() != 1) fail(source, "tensor " + t->name + " is not a vector of F32");
    const auto* v = static_cast<const float*>(t->data);
    out->assign(v, v + t->shape[0]);
  }
  s.original_max_position = file.metadata.find_int(p + "rope.scaling.original_context_length").value_or(c.max_position);
  s.factor = static_cast<double>(c.max_position) / static_cast<double>(std::max<int64_t>(s.original_max_position, 1));
  s.attention_factor = file.metadata.find_float(p + "rope.scaling.attn_factor")
                           .value_or(longrope_attention_factor(s.factor, s.original_max_position));
}

}  // namespace

double longrope_attention_factor(double factor, int64_t original_max_position) {
  if (factor <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original_max_position)));
}

void apply_gguf_gemma_rules(ModelConfig& c) {
  c.sandwich_norms = true;
  c.norm_weight_offset = 0.0;
  c.activation = GateActivation::gelu_tanh;
  c.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
  const bool gemma3 = c.architecture == "gemma3";
  const int64_t layers_27b = gemma3 ? 62 : 46;
  c.attn_scale = c.num_layers == layers_27b && c.num_heads > 0
                     ? 1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads))
                     : 0.0;
  c.rope_local_theta = gemma3 ? 10000.0 : 0.0;
  c.sliding_layers.clear();
  if (!c.sliding_window) return;
  c.sliding_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t l = 0; l < c.num_layers; ++l)
    c.sliding_layers[static_cast<size_t>(l)] = gemma3 ? (l + 1) % 6 != 0 : l % 2 == 0;
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail(source, std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position, "max_position_embeddings");
  if (num_heads % num_kv_heads != 0)
    fail(source, "num_attention_heads (" + std::to_string(num_heads) + ") is not a multiple of num_key_value_heads (" +
                     std::to_string(num_kv_heads) + ")");
  if (head_dim % 2 != 0) fail(source, "head_dim must be even for RoPE, got " + std::to_string(head_dim));
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) fail(source, "rms_norm_eps must be positive");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) fail(source, "rope_theta must be positive");
  if (rope_scaling.type != RopeScaling::Type::None && !(rope_scaling.factor > 0))
    fail(source, "rope scaling factor must be positive");
  if (rope_scaling.type == RopeScaling::Type::Llama3 &&
      (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) || rope_scaling.original_max_position <= 0))
    fail(source, "llama3 rope scaling needs high_freq_factor > low_freq_factor and original_max_position_embeddings > 0");
  if (rotary_dim < 0 || rotary_dim > head_dim || rope_dim() % 2 != 0)
    fail(source, "the rotary dims (" + std::to_string(rope_dim()) + ") must be even and at most head_dim (" +
                     std::to_string(head_dim) + ")");
  if (rope_style == RopeStyle::Interleaved && rope_dim() != head_dim)
    fail(source, "partial rotary with llama.cpp's interleaved q/k rows is not supported");
  if (rope_scaling.type == RopeScaling::Type::LongRope) {
    const auto pairs = static_cast<size_t>(rope_dim() / 2);
    for (const auto* factors : {&rope_scaling.short_factor, &rope_scaling.long_factor}) {
      if (factors->size() != pairs)
        fail(source, "longrope lists " + std::to_string(factors->size()) + " factors, not rotary dims / 2 = " +
                         std::to_string(pairs));
      for (double f : *factors)
        if (!(f > 0) || !std::isfinite(f)) fail(source, "longrope factors must be positive");
    }
    if (rope_scaling.original_max_position <= 0) fail(source, "longrope needs original_max_position_embeddings > 0");
    if (!(rope_scaling.attention_factor > 0) || !std::isfinite(rope_scaling.attention_factor))
      fail(source, "the longrope attention factor must be positive");
  }
  if (sliding_window && *sliding_window <= 0) fail(source, "sliding_window must be positive");
  if (!sliding_layers.empty() && static_cast<int64_t>(sliding_layers.size()) != num_layers)
    fail(source, "the sliding-window layers do not match the layer count");
  if (!no_rope_layers.empty() && static_cast<int64_t>(no_rope_layers.size()) != num_layers)
    fail(source, "the layers without RoPE do not match the layer count");
  if (!(rope_local_theta >= 0) || !std::isfinite(rope_local_theta)) fail(source, "the local rope base must be positive");
  if (!(attn_scale >= 0) || !std::isfinite(attn_scale)) fail(source, "the attention scale must be positive");
  for (const auto& cap : {attn_softcap, final_softcap})
    if (cap && !(*cap > 0 && std::isfinite(*cap))) fail(source, "logit soft-capping must be positive");
  if (num_experts != 0) {
    positive(num_experts, "num_experts");
    positive(expert_intermediate_size, "moe_intermediate_size");
    if (experts_per_token <= 0 || experts_per_token > num_experts)
      fail(source, "num_experts_per_tok must be between 1 and num_experts (" + std::to_string(num_experts) + "), got " +
                       std::to_string(experts_per_token));
    if (shared_expert_intermediate_size < 0) fail(source, "shared_expert_intermediate_size must not be negative");
    if (!dense_layers.empty() && static_cast<int64_t>(dense_layers.size()) != num_layers)
      fail(source, "the dense layers do not match the layer count");
  }
  for (auto id : eos_token_ids)
    if (id < 0 || id >= vocab_size) fail(source, "eos token id " + std::to_string(id) + " is outside the vocabulary");
}

ModelConfig parse_hf_config(const std::string& config_json, const std::string& generation_config_json,
                            const std::string& source) {
  json j;
  try {
    j = json::parse(config_json);
  } catch (const json::exception& e) {
    fail(source, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(source, "not a JSON object");

  std::string arch;
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    arch = (*it)[0].get<std::string>();
  else if (auto mt = j.find("model_type"); mt != j.end() && mt->is_string())
    arch = mt->get<std::string>();
  ModelConfig c;
  if (arch == "LlamaForCausalLM" || arch == "llama") {
    c.architecture = "llama";
  } else if (arch == "MistralForCausalLM" || arch == "mistral") {
    c.architecture = "mistral";
  } else if (arch == "Qwen2ForCausalLM" || arch == "qwen2") {
    c.architecture = "qwen2";
  } else if (arch == "Qwen3ForCausalLM" || arch == "qwen3") {
    c.architecture = "qwen3";
  } else if (arch == "Gemma2ForCausalLM" || arch == "gemma2") {
    c.architecture = "gemma2";
  } else if (arch == "Gemma3ForCausalLM" || arch == "gemma3_text") {
    c.architecture = "gemma3";
  } else if (arch == "SmolLM3ForCausalLM" || arch == "smollm3") {
    c.architecture = "smollm3";
  } else if (arch == "Phi3ForCausalLM" || arch == "phi3") {
    c.architecture = "phi3";
  } else if (arch == "MixtralForCausalLM" || arch == "mixtral") {
    c.architecture = "mixtral";
  } else if (arch == "Qwen2MoeForCausalLM" || arch == "qwen2_moe") {
    c.architecture = "qwen2moe";
  } else if (arch == "Qwen3MoeForCausalLM" || arch == "qwen3_moe") {
    c.architecture = "qwen3moe";
  } else {
    fail(source, "unsupported architecture \"" + (arch.empty() ? std::string("(none given)") : arch) +
                     "\" (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                     "Gemma2ForCausalLM, Gemma3ForCausalLM, SmolLM3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, "
                     "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM)");
  }
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  // Gemma's configs name it hidden_activation (and some keep a stale hidden_act beside it).
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto act = j.find(key);
    if (act == j.end() || !act->is_string()) continue;
    if (*act == "gelu_pytorch_tanh" || *act == "gelu_tanh")
      c.activation = GateActivation::gelu_tanh;
    else if (*act != "silu")
      fail(source, "unsupported " + std::string(key) + " \"" + act->get<std::string>() + "\" (supported: silu, gelu_pytorch_tanh)");
    break;
  }
  if (get_bool_or(j, "mlp_bias", false, source)) fail(source, "mlp_bias is not supported");

  c.vocab_size = get_int(j, "vocab_size", source);
  c.hidden_size = get_int(j, "hidden_size", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.num_layers = get_int(j, "num_hidden_layers", source);
  c.num_heads = get_int(j, "num_attention_heads", source);
  c.num_kv_heads = get_int_or(j, "num_key_value_heads", c.num_heads, source);
  c.head_dim = get_int_or(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0, source);
  c.max_position = get_int_or(j, "max_position_embeddings", 2048, source);
  c.rms_norm_eps = get_number_or(j, "rms_norm_eps", 1e-6, source);
  c.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", gemma, source);
  read_rope(j, c, source);
  if (gemma) read_gemma(j, c, source);
  const bool moe = c.architecture == "mixtral" || c.architecture == "qwen2moe" || c.architecture == "qwen3moe";
  if (moe) read_experts(j, c, source);

  if (c.architecture == "mistral" || c.architecture == "mixtral" || c.architecture == "phi3") {
    if (auto sw = get_int_or(j, "sliding_window", 0, source); sw > 0) c.sliding_window = sw;
  } else if (c.architecture != "gemma2" && c.architecture != "gemma3" && c.architecture != "llama") {
    if (get_bool_or(j, "use_sliding_window", false, source))
      fail(source, "use_sliding_window is not supported for " + c.architecture);
  }
  if (c.architecture == "qwen2" || c.architecture == "qwen2moe") {
    c.qkv_bias = true;
  } else {
    c.qkv_bias = c.o_bias = get_bool_or(j, "attention_bias", false, source);
  }
  c.qk_norm = c.qk_norm || c.architecture == "qwen3" || c.architecture == "qwen3moe";
  if (c.architecture == "smollm3") read_no_rope_layers(j, c, source);

  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer())
    c.bos_token_id = static_cast<int32_t>(it->get<int64_t>());
  add_token_ids(j, "eos_token_id", c.eos_token_ids, source);
  if (!generation_config_json.empty()) {
    json g;
    try {
      g = json::parse(generation_config_json);
    } catch (const json::exception& e) {
      fail(source, std::string("generation_config.json is not valid JSON: ") + e.what());
    }
    if (g.is_object()) add_token_ids(g, "eos_token_id", c.eos_token_ids, source);
  }
  c.validate(source);
  return c;
}

ModelConfig read_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream probe(path);
  if (!probe) fail(path, "cannot open (an HF model directory needs config.json)");
  return parse_hf_config(read_text(path), read_text(dir + "/generation_config.json"), path);
}

ModelConfig read_gguf_config(const GgufFile& file) {
  const GgufMetadata& m = file.metadata;
  const std::string& source = file.file->path();
  const std::string arch = m.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "gemma2" && arch != "gemma3" && arch != "smollm3" &&
      arch != "phi3" && arch != "qwen2moe" && arch != "qwen3moe")
    fail(source, "unsupported GGUF architecture \"" + arch +
                     "\" (supported: llama, qwen2, qwen3, gemma2, gemma3, smollm3, phi3, qwen2moe, qwen3moe)");
  ModelConfig c;
  c.architecture = arch;
  const std::string p = arch + ".";
  c.hidden_size = m.get_int(p + "embedding_length");
  c.intermediate_size = m.get_int(p + "feed_forward_length");
  c.num_layers = m.get_int(p + "block_count");
  c.num_heads = m.get_int(p + "attention.head_count");
  c.num_kv_heads = m.find_int(p + "attention.head_count_kv").value_or(c.num_heads);
  c.head_dim = m.find_int(p + "attention.key_length").value_or(c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position = m.find_int(p + "context_length").value_or(2048);
  c.rms_norm_eps = m.get_float(p + "attention.layer_norm_rms_epsilon");
  c.rope_theta = m.find_float(p + "rope.freq_base").value_or(10000.0);
  c.rotary_dim = m.find_int(p + "rope.dimension_count").value_or(0);
  // The embedding is the truth about the vocabulary: older files have no vocab_size key.
  for (const auto& t : file.tensors)
    if (t.name == "token_embd.weight" && t.shape.size() == 2) c.vocab_size = t.shape[0];
  if (c.vocab_size == 0) fail(source, "missing tensor token_embd.weight");
  if (auto type = m.find_string(p + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear") fail(source, "unsupported GGUF rope scaling type \"" + *type + "\"");
    c.rope_scaling.type = RopeScaling::Type::Linear;
    c.rope_scaling.factor = m.get_float(p + "rope.scaling.factor");
  }
  if (auto sw = m.find_int(p + "attention.sliding_window"); sw && *sw > 0) c.sliding_window = *sw;
  // llama.cpp's converter permutes Llama (and SmolLM3) q/k rows into adjacent pairs; Qwen and
  // Gemma keep HF order.
  c.rope_style = arch == "llama" || arch == "smollm3" ? RopeStyle::Interleaved : RopeStyle::HalfSplit;
  if (arch == "smollm3") {  // llama.cpp fixes it: every fourth layer has no RoPE
    c.no_rope_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
    for (int64_t l = 3; l < c.num_layers; l += 4) c.no_rope_layers[static_cast<size_t>(l)] = true;
  }
  c.qkv_bias = arch == "qwen2" || arch == "qwen2moe";
  c.qk_norm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3";
  read_gguf_experts(file, p, c);
  if (arch == "gemma2" || arch == "gemma3") read_gguf_gemma(m, p, c);
  if (arch == "phi3") read_gguf_longrope(file, p, c);
  if (auto bos = m.find_int("tokenizer.ggml.bos_token_id")) c.bos_token_id = static_cast<int32_t>(*bos);
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (auto id = m.find_int(key)) {
      const auto v = static_cast<int32_t>(*id);
      bool seen = false;
      for (auto e : c.eos_token_ids) seen = seen || e == v;
      if (!seen) c.eos_token_ids.push_back(v);
    }
  // tie_word_embeddings is decided by the loader: GGUF says it by leaving out output.weight.
  c.validate(source);
  return c;
}

std::vector<float> rope_inv_freq(const ModelConfig& c, bool local, bool long_factors) {
  const int64_t dim = c.rope_dim(), half = dim / 2;
  const auto& s = c.rope_scaling;
  const bool longrope = !local && s.type == RopeScaling::Type::LongRope;
  std::vector<float> inv(static_cast<size_t>(half));
  const double theta = local && c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  for (int64_t i = 0; i < half; ++i) {
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), in float32; LongRope
    // divides by its factor before inverting: 1 / (factor * base ** ...).
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const double divisor = longrope ? (long_factors ? s.long_factor : s.short_factor)[static_cast<size_t>(i)] : 1.0;
    inv[static_cast<size_t>(i)] = 1.0f / (static_cast<float>(divisor) * std::pow(static_cast<float>(theta), exponent));
  }
  if (local) return inv;  // Gemma 3 scales only its global layers' frequencies
  if (s.type == RopeScaling::Type::Linear) {
    for (auto& f : inv) f = f / static_cast<float>(s.factor);
  } else if (s.type == RopeScaling::Type::Llama3) {
    // Long wavelengths are slowed by `factor`, short ones kept, and the band between is
    // interpolated smoothly (transformers' _compute_llama3_parameters).
    const double old_ctx = static_cast<double>(s.original_max_position);
    const double low_wavelen = old_ctx / s.low_freq_factor;
    const double high_wavelen = old_ctx / s.high_freq_factor;
    const double pi = 3.14159265358979323846;
    for (auto& f : inv) {
      const double wavelen = 2 * pi / static_cast<double>(f);
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / s.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = static_cast<float>((1 - smooth) * f / s.factor + smooth * f);
      }
    }
  }
  return inv;
}

}  // namespace orzo
