#include "cli/model_info.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/load_error.hpp"
#include "core/read_file.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "runtime/gguf_names.hpp"
#include "runtime/model_config.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw LoadError(path + ": not valid JSON: " + e.what());
  }
}

// The value at a dotted path ("rope_scaling.factor"); null when any step is absent.
const json* json_at(const json& j, std::string_view path) {
  const json* node = &j;
  while (!path.empty()) {
    const size_t dot = std::min(path.find('.'), path.size());
    if (!node->is_object()) return nullptr;
    const auto it = node->find(std::string(path.substr(0, dot)));
    if (it == node->end() || it->is_null()) return nullptr;
    node = &*it;
    path.remove_prefix(std::min(dot + 1, path.size()));
  }
  return node;
}

std::optional<std::string> json_text(const json& j, std::string_view path) {
  const json* v = json_at(j, path);
  if (v && v->is_string()) return v->get<std::string>();
  return std::nullopt;
}

void summarize_tensors(const std::vector<TensorView>& tensors, ModelInfo& info) {
  std::map<DType, TensorTypeUse> by_type;
  for (const auto& t : tensors) {
    TensorTypeUse& use = by_type[t.dtype];
    ++use.count;
    use.bytes += t.nbytes;
    info.parameters += t.numel();
  }
  info.tensors = static_cast<int64_t>(tensors.size());
  for (auto& [dtype, use] : by_type) {
    use.type = dtype_lower_name(dtype);
    info.tensor_types.push_back(use);
  }
  std::stable_sort(info.tensor_types.begin(), info.tensor_types.end(),
                   [](const TensorTypeUse& a, const TensorTypeUse& b) { return a.bytes > b.bytes; });
}

// LoadError names the file first; info has already named it.
std::string without_path(const std::string& path, const std::string& message) {
  const std::string prefix = path + ": ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size()) : message;
}

const char* scaling_name(RopeScaling::Type t) {
  switch (t) {
    case RopeScaling::Type::None: return "none";
    case RopeScaling::Type::Linear: return "linear";
    case RopeScaling::Type::Llama3: return "llama3";
    case RopeScaling::Type::LongRope: return "longrope";
  }
  return "?";
}

// A model orzo runs: the shape exactly as the forward pass will see it.
void take_config(const ModelConfig& c, ModelInfo& info) {
  info.layers = c.num_layers;
  info.hidden_size = c.hidden_size;
  info.ffn_size = c.intermediate_size;
  info.heads = c.num_heads;
  info.kv_heads = c.num_kv_heads;
  info.head_dim = c.head_dim;
  info.vocab_size = c.vocab_size;
  info.context_length = c.max_position;
  info.rope_theta = c.rope_theta;
  info.rope_scaling = scaling_name(c.rope_scaling.type);
  if (c.rope_scaling.type != RopeScaling::Type::None) info.rope_scaling_factor = c.rope_scaling.factor;
  if (c.rope_scaling.type == RopeScaling::Type::LongRope) info.rope_original_context = c.rope_scaling.original_max_position;
  if (c.rope_dim() != c.head_dim) info.rotary_dim = c.rope_dim();
  info.norm_eps = c.rms_norm_eps;
  info.sliding_window = c.sliding_window;
  for (int64_t l = 0; l < c.num_layers; ++l) info.sliding_layers += c.window_of(l).has_value();
  if (c.rope_local_theta > 0) info.local_rope_theta = c.rope_local_theta;
  if (c.num_experts == 0) return;
  info.experts = c.num_experts;
  info.experts_per_token = c.experts_per_token;
  info.expert_ffn_size = c.expert_intermediate_size;
  info.shared_expert_ffn_size = c.shared_expert_intermediate_size;
  for (int64_t l = 0; l < c.num_layers; ++l) info.expert_layers += c.has_experts(l);
}

// A model orzo does not run: what its file states under the usual names, and nothing guessed
// where it is silent. The GGUF key follows "<architecture>.".
struct StatedKey {
  const char* gguf;
  const char* hf;
};

struct StatedInt {
  std::optional<int64_t> ModelInfo::*field;
  StatedKey key;
};

struct StatedFloat {
  std::optional<double> ModelInfo::*field;
  StatedKey key;
};

constexpr StatedInt kStatedInts[] = {
    {&ModelInfo::layers, {"block_count", "num_hidden_layers"}},
    {&ModelInfo::hidden_size, {"embedding_length", "hidden_size"}},
    {&ModelInfo::ffn_size, {"feed_forward_length", "intermediate_size"}},
    {&ModelInfo::heads, {"attention.head_count", "num_attention_heads"}},
    {&ModelInfo::kv_heads, {"attention.head_count_kv", "num_key_value_heads"}},
    {&ModelInfo::head_dim, {"attention.key_length", "head_dim"}},
    {&ModelInfo::vocab_size, {"vocab_size", "vocab_size"}},
    {&ModelInfo::context_length, {"context_length", "max_position_embeddings"}},
};

constexpr StatedFloat kStatedFloats[] = {
    {&ModelInfo::rope_theta, {"rope.freq_base", "rope_theta"}},
    {&ModelInfo::rope_scaling_factor, {"rope.scaling.factor", "rope_scaling.factor"}},
    {&ModelInfo::norm_eps, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"}},
};

constexpr StatedKey kStatedRopeScaling = {"rope.scaling.type", "rope_scaling.rope_type"};

class GgufKeys {
 public:
  GgufKeys(const GgufMetadata& m, const std::string& architecture) : m_(m), prefix_(architecture + ".") {}
  std::optional<int64_t> integer(const StatedKey& k) const {
    const auto key = scalar_key(k);
    return key ? m_.find_int(*key) : std::nullopt;
  }
  std::optional<double> number(const StatedKey& k) const {
    const auto key = scalar_key(k);
    return key ? m_.find_float(*key) : std::nullopt;
  }
  std::optional<std::string> text(const StatedKey& k) const {
    const auto key = scalar_key(k);
    return key ? m_.find_string(*key) : std::nullopt;
  }

 private:
  // Some architectures store a value per layer (an array), which has no one value to show.
  std::optional<std::string> scalar_key(const StatedKey& k) const {
    std::string key = prefix_ + k.gguf;
    if (!m_.has(key) || m_.raw(key).type == GgufType::Array) return std::nullopt;
    return key;
  }

  const GgufMetadata& m_;
  std::string prefix_;
};

class HfKeys {
 public:
  explicit HfKeys(const json& config) : config_(config) {}
  std::optional<int64_t> integer(const StatedKey& k) const {
    const json* v = json_at(config_, k.hf);
    if (v && v->is_number_integer()) return v->get<int64_t>();
    return std::nullopt;
  }
  std::optional<double> number(const StatedKey& k) const {
    const json* v = json_at(config_, k.hf);
    if (v && v->is_number()) return v->get<double>();
    return std::nullopt;
  }
  std::optional<std::string> text(const StatedKey& k) const { return json_text(config_, k.hf); }

 private:
  const json& config_;
};

template <typename Keys>
void take_stated(const Keys& keys, ModelInfo& info) {
  for (const auto& s : kStatedInts) info.*s.field = keys.integer(s.key);
  for (const auto& s : kStatedFloats) info.*s.field = keys.number(s.key);
  info.rope_scaling = keys.text(kStatedRopeScaling).value_or("none");
}

// The metadata as stored, not through a Tokenizer: that would refuse the kinds orzo cannot
// encode, which info still describes, and build a whole vocabulary only to name it.
std::optional<TokenizerInfo> gguf_tokenizer(const GgufMetadata& m) {
  const auto kind = m.find_string("tokenizer.ggml.model");
  if (!kind) return std::nullopt;
  TokenizerInfo t;
  t.kind = *kind;
  t.pre = m.find_string("tokenizer.ggml.pre").value_or("");
  const std::vector<std::string> tokens =
      m.has("tokenizer.ggml.tokens") ? m.get_string_array("tokenizer.ggml.tokens") : std::vector<std::string>{};
  t.vocab_size = static_cast<int64_t>(tokens.size());
  auto special = [&](const char* key) -> std::optional<SpecialToken> {
    const auto id = m.find_int(key);
    // Converters write -1 (or 0xFFFFFFFF) for "none".
    if (!id || *id < 0 || static_cast<uint64_t>(*id) >= tokens.size()) return std::nullopt;
    return SpecialToken{*id, tokens[static_cast<size_t>(*id)]};
  };
  t.bos = special("tokenizer.ggml.bos_token_id");
  t.eos = special("tokenizer.ggml.eos_token_id");
  t.pad = special("tokenizer.ggml.padding_token_id");
  t.unk = special("tokenizer.ggml.unknown_token_id");
  t.chat_template = m.find_string("tokenizer.chat_template").value_or("");
  return t;
}

// tokenizer_config.json writes a special token as its text or as {"content": text}.
std::optional<std::string> config_token(const json& config, const std::string& key) {
  if (auto text = json_text(config, key)) return text;
  return json_text(config, key + ".content");
}

// Through orzo's loader, which resolves BOS/EOS and the chat template as generation does.
std::optional<TokenizerInfo> hf_tokenizer(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  if (!fs::is_regular_file(path)) return std::nullopt;
  const json tokenizer_json = read_json(path);
  TokenizerInfo t;
  t.kind = json_text(tokenizer_json, "model.type").value_or("?");
  try {
    const Tokenizer tok = Tokenizer::from_hf_dir(dir);
    t.vocab_size = tok.vocab_size();
    if (tok.bos_id()) t.bos = SpecialToken{*tok.bos_id(), tok.bos_token()};
    if (tok.eos_id()) t.eos = SpecialToken{*tok.eos_id(), tok.eos_token()};
    t.chat_template = tok.chat_template();
    const std::string config_path = dir + "/tokenizer_config.json";
    const json config = fs::is_regular_file(config_path) ? read_json(config_path) : json::object();
    auto named = [&](std::optional<std::string> text) -> std::optional<SpecialToken> {
      if (!text) return std::nullopt;
      const auto id = tok.token_to_id(*text);
      if (!id) return std::nullopt;
      return SpecialToken{*id, *text};
    };
    t.pad = named(config_token(config, "pad_token"));
    t.unk = named(config_token(config, "unk_token"));
    if (!t.unk) t.unk = named(json_text(tokenizer_json, "model.unk_token"));
  } catch (const LoadError& e) {
    t.unreadable = e.what();
  }
  return t;
}

ModelInfo describe_gguf(const std::string& path) {
  const GgufFile f = read_gguf(path);
  const GgufMetadata& m = f.metadata;
  ModelInfo info;
  info.path = path;
  info.format = "gguf";
  info.gguf_version = f.version;
  info.name = m.find_string("general.name").value_or("");
  info.architecture = m.find_string("general.architecture").value_or("");
  try {
    take_config(read_gguf_config(f), info);
  } catch (const LoadError& e) {
    info.not_runnable = without_path(path, e.what());
    take_stated(GgufKeys(m, info.architecture), info);
  }
  // GGUF ties the LM head to the embedding by leaving the head out.
  const std::string head = gguf_name_of_hf("lm_head.weight", info.architecture).value_or("");
  info.tied_embeddings =
      std::none_of(f.tensors.begin(), f.tensors.end(), [&](const TensorView& t) { return t.name == head; });
  summarize_tensors(f.tensors, info);
  info.file_bytes = f.file->size();
  info.tokenizer = gguf_tokenizer(m);
  return info;
}

ModelInfo describe_hf(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  if (!fs::is_regular_file(config_path))
    throw LoadError(dir + ": a directory without config.json is not an HF model directory");
  const json config = read_json(config_path);
  ModelInfo info;
  info.path = dir;
  info.format = "hf";
  if (const json* a = json_at(config, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    info.architecture = (*a)[0].get<std::string>();
  info.model_type = json_text(config, "model_type").value_or("");
  try {
    const ModelConfig c = read_hf_config(dir);
    take_config(c, info);
    info.tied_embeddings = c.tie_word_embeddings;
  } catch (const LoadError& e) {
    info.not_runnable = without_path(config_path, e.what());
    take_stated(HfKeys(config), info);
    if (const json* tied = json_at(config, "tie_word_embeddings"); tied && tied->is_boolean())
      info.tied_embeddings = tied->get<bool>();
  }
  std::vector<TensorView> tensors;
  for (const SafetensorsFile& f : read_safetensors_dir(dir)) {
    tensors.insert(tensors.end(), f.tensors.begin(), f.tensors.end());
    info.file_bytes += f.file->size();
  }
  summarize_tensors(tensors, info);
  info.tokenizer = hf_tokenizer(dir);
  return info;
}

}  // namespace

ModelInfo describe_model(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::invalid_argument(path + ": no such file or directory");
  ModelInfo info = fs::is_directory(path, ec) ? describe_hf(path) : describe_gguf(path);
  // A GGUF file that states no vocabulary size still lists its tokens.
  if (!info.vocab_size && info.tokenizer) info.vocab_size = info.tokenizer->vocab_size;
  return info;
}

}  // namespace orzo::cli
